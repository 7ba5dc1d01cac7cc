/* A CPU stand-in for the driver's libcuda.so.1 (found first on
   LD_LIBRARY_PATH) for nccl_abort_check: device memory is host memory,
   streams and events do nothing. */
#include <stdlib.h>
#include <string.h>

int cuInit(unsigned f) { (void)f; return 0; }
int cuDeviceGet(int *d, int o) { *d = o; return 0; }
int cuDevicePrimaryCtxRetain(void **c, int d) {
  static int ctx;
  (void)d;
  *c = &ctx;
  return 0;
}
int cuCtxSetCurrent(void *c) { (void)c; return 0; }
int cuStreamCreate(void **s, unsigned f) {
  static int stream;
  (void)f;
  *s = &stream;
  return 0;
}
int cuEventCreate(void **e, unsigned f) {
  static int event;
  (void)f;
  *e = &event;
  return 0;
}
int cuEventRecord(void *e, void *s) { (void)e, (void)s; return 0; }
int cuStreamWaitEvent(void *s, void *e, unsigned f) { (void)s, (void)e, (void)f; return 0; }
int cuStreamSynchronize(void *s) { (void)s; return 0; }
int cuMemAlloc_v2(unsigned long long *p, size_t b) {
  *p = (unsigned long long)malloc(b);
  return 0;
}
int cuMemFree_v2(unsigned long long p) {
  free((void *)p);
  return 0;
}
int cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t b) {
  memcpy((void *)d, s, b);
  return 0;
}
int cuMemcpyDtoH_v2(void *d, unsigned long long s, size_t b) {
  memcpy(d, (void *)s, b);
  return 0;
}
int cuGetErrorString(int r, const char **t) {
  (void)r;
  *t = "fake";
  return 0;
}
