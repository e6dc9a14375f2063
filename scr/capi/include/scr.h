/*
 * scr.h: the C interface of SCR (Scalable Checkpoint/Restart), version 3.1,
 * as implemented by this project's Rust library (libscr). Names, signatures,
 * return codes and constants follow LLNL SCR 3.1's scr.h so that existing
 * applications build and run unchanged when relinked.
 */
#ifndef SCR_H
#define SCR_H

#define SCR_VERSION "v3.1.0"

/* Functions return SCR_SUCCESS on success. (SCR 3.1 defines no failure
 * constant; this library returns 1 on any failure.) */
#define SCR_SUCCESS (0)

/* Names and paths are shorter than this, NUL included. */
#define SCR_MAX_FILENAME (1024)

/* Dataset properties for SCR_Start_output. */
#define SCR_FLAG_NONE       (0 << 0)
#define SCR_FLAG_CHECKPOINT (1 << 0)
#define SCR_FLAG_OUTPUT     (1 << 1)

#ifdef __cplusplus
extern "C" {
#endif

/* Initialize the library (collective; MPI_Init must have been called). */
int SCR_Init(void);

/* Shut down the library (collective; call before MPI_Finalize). */
int SCR_Finalize(void);

/* Set ("KEY=VALUE"), unset ("KEY=") or query ("KEY") a parameter. Sets and
 * unsets return NULL; a query returns a string the caller frees with free(),
 * or NULL when the parameter has no value. */
const char* SCR_Config(const char* config);

/* SCR_Config with a printf-style format. */
const char* SCR_Configf(const char* format, ...);

/* Path to use for file `name` (buffer of SCR_MAX_FILENAME bytes in `file`). */
int SCR_Route_file(const char* name, char* file);

/* Whether a checkpoint is available to restart from, and its name. */
int SCR_Have_restart(int* flag, char* name);

/* Begin / end reading a checkpoint (collective). */
int SCR_Start_restart(char* name);
int SCR_Complete_restart(int valid);

/* Whether a checkpoint should be taken now (collective). */
int SCR_Need_checkpoint(int* flag);

/* Deprecated: SCR_Start_output(NULL, SCR_FLAG_CHECKPOINT) / SCR_Complete_output. */
int SCR_Start_checkpoint(void);
int SCR_Complete_checkpoint(int valid);

/* Begin / end writing a dataset (collective). */
int SCR_Start_output(const char* name, int flags);
int SCR_Complete_output(int valid);

/* Make `name` the checkpoint to restart from (collective). */
int SCR_Current(const char* name);

/* Remove dataset `name` from the index only / from the cache and index. */
int SCR_Drop(const char* name);
int SCR_Delete(const char* name);

/* The library version; the caller must not free it. */
char* SCR_Get_version(void);

/* Whether the application should stop now (collective). */
int SCR_Should_exit(int* flag);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SCR_H */
