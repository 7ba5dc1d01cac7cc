/* The MPI back end of trun, as a plugin (libtcc_mpi.so, built where an MPI
 * is installed): trun dlopens it only when it runs as one of several ranks
 * of a cpu step, so trun itself needs no MPI to start, and a machine
 * without one (the GPU machines) runs trun unchanged. Plain C: the plugin
 * and trun agree on this table and nothing else.
 *
 * Every function returning int32_t returns 0 on success, else a nonzero
 * code, with last_error() saying what failed (the MPI function and
 * MPI_Error_string's text). */
#ifndef TCC_RUNTIME_TRUN_DIST_MPI_MPIPLUGIN_H
#define TCC_RUNTIME_TRUN_DIST_MPI_MPIPLUGIN_H

#include "tcc/step_abi.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TCC_MPI_PLUGIN_SYMBOL "tcc_mpi_plugin_get"

typedef struct tcc_mpi_plugin {
  uint32_t struct_size; /* sizeof(tcc_mpi_plugin) at build time */
  /* MPI_Init_thread (funneled: trun calls MPI from its main thread only)
     with errors returned, not fatal; this process's rank and the world
     size of MPI_COMM_WORLD. */
  int32_t (*init)(int32_t *rank, int32_t *world_size);
  /* tcc_collectives.all_reduce over MPI_COMM_WORLD, in place (f32, f64;
     bf16 and f16 are summed in f32). `context` and `stream` are unused. */
  int32_t (*all_reduce)(void *context, void *buffer, int64_t count, tcc_dtype dtype,
                        tcc_reduction reduction, void *stream);
  /* `bytes` bytes from every rank into all[rank * bytes ...] (also
     tcc_collectives.all_gather, a byte copy of any dtype). */
  int32_t (*all_gather)(const void *mine, int64_t bytes, void *all);
  /* `count` bytes of rank `root`'s buffer to every rank's. */
  int32_t (*broadcast)(void *buffer, int64_t count, int32_t root);
  /* MPI_Finalize. */
  int32_t (*finalize)(void);
  /* MPI_Abort of every rank, with `code` (a rank that failed alone). */
  void (*abort)(int32_t code);
  const char *(*last_error)(void);
  /* MPI_Get_library_version's first line, e.g. "Open MPI v4.1.4, ...". */
  const char *(*library_version)(void);
  /* Appended (trun refuses a plugin whose struct_size lacks it):
     tcc_collectives.reduce_scatter over MPI_COMM_WORLD (f32, f64; bf16 and
     f16 are summed in f32). `context` and `stream` are unused. */
  int32_t (*reduce_scatter)(void *context, const void *send, void *recv, int64_t recv_count,
                            tcc_dtype dtype, tcc_reduction reduction, void *stream);
} tcc_mpi_plugin;

typedef const tcc_mpi_plugin *(*tcc_mpi_plugin_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TCC_RUNTIME_TRUN_DIST_MPI_MPIPLUGIN_H */
