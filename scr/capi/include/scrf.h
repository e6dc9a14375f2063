! scrf.h: the Fortran interface of SCR (Scalable Checkpoint/Restart) 3.1,
! as implemented by this project's Rust library (libscr). Subroutines take
! their error code last: CALL SCR_INIT(IERROR), CALL SCR_START_OUTPUT(NAME,
! FLAGS, IERROR), CALL SCR_ROUTE_FILE(NAME, FILE, IERROR), ... IERROR is
! SCR_SUCCESS on success. Output strings are blank-padded; one too short
! for the result is an error, never truncated. Valid in fixed and free
! source form: INCLUDE 'scrf.h'.

      INTEGER SCR_SUCCESS
      PARAMETER (SCR_SUCCESS = 0)

! Names and paths have fewer characters than this.
      INTEGER SCR_MAX_FILENAME
      PARAMETER (SCR_MAX_FILENAME = 1024)

! Dataset properties for SCR_START_OUTPUT; add them to combine.
      INTEGER SCR_FLAG_NONE
      PARAMETER (SCR_FLAG_NONE = 0)
      INTEGER SCR_FLAG_CHECKPOINT
      PARAMETER (SCR_FLAG_CHECKPOINT = 1)
      INTEGER SCR_FLAG_OUTPUT
      PARAMETER (SCR_FLAG_OUTPUT = 2)
