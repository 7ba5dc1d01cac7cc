/* A CPU stand-in for libnccl.so.2 (loaded through TCC_NCCL_LIBRARY) for
   nccl_abort_check: with FAKE_NCCL_GRAPHS_HELD set, ncclCommAbort and
   ncclCommDestroy never return, as NCCL 2.28's do while a CUDA graph still
   holds the communicator's collectives (commDestroySync waits for them). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  char internal[128];
} ncclUniqueId;

static int comm_storage;

static void block_if_graphs_held(void) {
  if (getenv("FAKE_NCCL_GRAPHS_HELD"))
    for (;;)
      pause();
}

int ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 7, sizeof *id);
  return 0;
}
int ncclCommInitRank(void **comm, int n, ncclUniqueId id, int r) {
  (void)n, (void)id, (void)r;
  *comm = &comm_storage;
  return 0;
}
int ncclAllReduce(void) { return 0; }
int ncclAllGather(void) { return 0; }
int ncclReduceScatter(void) { return 0; }
int ncclCommAbort(void *c) {
  (void)c;
  block_if_graphs_held();
  return 0;
}
int ncclCommDestroy(void *c) {
  (void)c;
  block_if_graphs_held();
  return 0;
}
int ncclCommGetAsyncError(void *c, int *r) {
  (void)c;
  *r = 0;
  return 0;
}
const char *ncclGetErrorString(int r) {
  (void)r;
  return "fake";
}
int ncclGetVersion(int *v) {
  *v = 22803;
  return 0;
}
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }
