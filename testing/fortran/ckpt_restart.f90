! A Fortran SCR application written for this project's tests: `write`
! checkpoints three times (SCR_CONFIG before and after SCR_INIT,
! SCR_NEED_CHECKPOINT, SCR_START_OUTPUT, SCR_ROUTE_FILE,
! SCR_COMPLETE_OUTPUT); `read` restarts from the newest checkpoint and
! checks every value each rank wrote. Any failure aborts the job.
program ckpt_restart
  implicit none
  include 'mpif.h'
  include 'scrf.h'
  integer, parameter :: n = 100000
  integer :: ierr, rank, nranks, i, flag, valid, k
  integer, allocatable :: buf(:)
  character(len=16) :: mode
  character(len=SCR_MAX_FILENAME) :: name, fname, path, val
  character(len=3) :: short

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  call get_command_argument(1, mode)
  allocate(buf(n))

  ! A setting before SCR_INIT leaves VAL blank.
  val = 'untouched'
  call SCR_CONFIG('SCR_FLUSH=0', val, ierr)
  call expect(ierr == SCR_SUCCESS .and. val == ' ', 'SCR_CONFIG set')
  call SCR_INIT(ierr)
  call expect(ierr == SCR_SUCCESS, 'SCR_INIT')
  call SCR_CONFIG('SCR_FLUSH', val, ierr)
  call expect(ierr == SCR_SUCCESS .and. trim(val) == '0', 'SCR_CONFIG query')
  write(fname, '(a,i0,a)') 'rank_', rank, '.dat'

  if (trim(mode) == 'write') then
    do i = 1, 3
      call SCR_NEED_CHECKPOINT(flag, ierr)
      call expect(ierr == SCR_SUCCESS, 'SCR_NEED_CHECKPOINT')
      write(name, '(a,i0)') 'ckpt.', i
      call SCR_START_OUTPUT(name, SCR_FLAG_CHECKPOINT, ierr)
      call expect(ierr == SCR_SUCCESS, 'SCR_START_OUTPUT')
      call SCR_ROUTE_FILE(fname, path, ierr)
      call expect(ierr == SCR_SUCCESS, 'SCR_ROUTE_FILE')
      do k = 1, n
        buf(k) = value(rank, i, k)
      end do
      open(10, file=trim(path), access='stream', form='unformatted', &
           status='replace', iostat=ierr)
      call expect(ierr == 0, 'open for writing')
      write(10) buf
      close(10)
      call SCR_COMPLETE_OUTPUT(1, ierr)
      call expect(ierr == SCR_SUCCESS, 'SCR_COMPLETE_OUTPUT')
    end do
    call SCR_GET_VERSION(val, ierr)
    call expect(ierr == SCR_SUCCESS .and. val(1:1) == 'v', 'SCR_GET_VERSION')
    if (rank == 0) print '(a,i0,a,a)', 'FORTRAN wrote 3 checkpoints on ', &
      nranks, ' ranks with SCR ', trim(val)
  else
    ! A name variable too short for the answer is an error, not a cut.
    call SCR_HAVE_RESTART(flag, short, ierr)
    call expect(ierr /= SCR_SUCCESS, 'SCR_HAVE_RESTART into 3 characters')
    call SCR_HAVE_RESTART(flag, name, ierr)
    call expect(ierr == SCR_SUCCESS .and. flag == 1, 'SCR_HAVE_RESTART')
    call expect(trim(name) == 'ckpt.3', 'the newest checkpoint is offered')
    call SCR_START_RESTART(name, ierr)
    call expect(ierr == SCR_SUCCESS, 'SCR_START_RESTART')
    call SCR_ROUTE_FILE(fname, path, ierr)
    call expect(ierr == SCR_SUCCESS, 'SCR_ROUTE_FILE (restart)')
    open(10, file=trim(path), access='stream', form='unformatted', &
         status='old', iostat=ierr)
    call expect(ierr == 0, 'open for reading')
    read(10, iostat=ierr) buf
    close(10)
    valid = 1
    if (ierr /= 0) valid = 0
    do k = 1, n
      if (buf(k) /= value(rank, 3, k)) valid = 0
    end do
    call SCR_COMPLETE_RESTART(valid, ierr)
    call expect(valid == 1 .and. ierr == SCR_SUCCESS, 'every value read back')
    if (rank == 0) print '(a,a,a,i0,a)', 'FORTRAN restarted from ', &
      trim(name), ': ', nranks, ' ranks, every value matched'
  end if

  call SCR_FINALIZE(ierr)
  call expect(ierr == SCR_SUCCESS, 'SCR_FINALIZE')
  call MPI_FINALIZE(ierr)

contains

  integer function value(r, c, k)
    integer, intent(in) :: r, c, k
    value = r * 1000003 + c * 7919 + k
  end function value

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print '(a,i0,a,a)', 'FORTRAN FAIL rank ', rank, ': ', what
      call MPI_ABORT(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine expect

end program ckpt_restart
