// docs/design/compiled-launch.md's evidence: drives an XLA:CPU PJRT plugin through the
// PJRT C API alone (no Python): GetPjrtApi, client, compile StableHLO text,
// host -> device, execute, device -> host. Build: gcc -o smoke pjrt_cpu_smoke.c -ldl
// (with the plugin's pjrt_c_api.h beside it); run: ./smoke PLUGIN.so add.mlir opts.pb
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pjrt_c_api.h"

static const PJRT_Api* api;
static void check(PJRT_Error* e, const char* what) {
  if (!e) return;
  PJRT_Error_Message_Args m = {PJRT_Error_Message_Args_STRUCT_SIZE, NULL, e};
  api->PJRT_Error_Message(&m);
  fprintf(stderr, "%s: %.*s\n", what, (int)m.message_size, m.message);
  exit(1);
}
static char* slurp(const char* p, size_t* n) {
  FILE* f = fopen(p, "rb"); fseek(f, 0, SEEK_END); *n = ftell(f); fseek(f, 0, SEEK_SET);
  char* b = malloc(*n + 1); fread(b, 1, *n, f); fclose(f); b[*n] = 0; return b;
}
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  const PJRT_Api* (*get)(void) = (const PJRT_Api* (*)(void))dlsym(h, "GetPjrtApi");
  api = get();
  printf("PJRT C API %d.%d\n", api->pjrt_api_version.major_version, api->pjrt_api_version.minor_version);
  PJRT_Plugin_Initialize_Args ia = {PJRT_Plugin_Initialize_Args_STRUCT_SIZE};
  check(api->PJRT_Plugin_Initialize(&ia), "initialize");
  PJRT_Client_Create_Args ca; memset(&ca, 0, sizeof ca); ca.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  check(api->PJRT_Client_Create(&ca), "client");
  PJRT_Client_PlatformName_Args pn = {PJRT_Client_PlatformName_Args_STRUCT_SIZE, NULL, ca.client};
  check(api->PJRT_Client_PlatformName(&pn), "platform");
  printf("platform %.*s\n", (int)pn.platform_name_size, pn.platform_name);
  PJRT_Client_AddressableDevices_Args da = {PJRT_Client_AddressableDevices_Args_STRUCT_SIZE, NULL, ca.client};
  check(api->PJRT_Client_AddressableDevices(&da), "devices");
  size_t code_n, opt_n;
  char* code = slurp(argv[2], &code_n);
  char* opts = slurp(argv[3], &opt_n);
  PJRT_Program prog = {PJRT_Program_STRUCT_SIZE, NULL, code, code_n, "mlir", 4};
  PJRT_Client_Compile_Args cc; memset(&cc, 0, sizeof cc); cc.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
  cc.client = ca.client; cc.program = &prog; cc.compile_options = opts; cc.compile_options_size = opt_n;
  check(api->PJRT_Client_Compile(&cc), "compile");
  float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40}, out[4];
  int64_t dims[1] = {4};
  PJRT_Buffer* in[2];
  float* hosts[2] = {x, y};
  for (int i = 0; i < 2; ++i) {
    PJRT_Client_BufferFromHostBuffer_Args b; memset(&b, 0, sizeof b);
    b.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE; b.client = ca.client;
    b.data = hosts[i]; b.type = PJRT_Buffer_Type_F32; b.dims = dims; b.num_dims = 1;
    b.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableZeroCopy; b.device = da.addressable_devices[0];
    check(api->PJRT_Client_BufferFromHostBuffer(&b), "buffer");
    in[i] = b.buffer;
  }
  PJRT_ExecuteOptions eo; memset(&eo, 0, sizeof eo); eo.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  PJRT_Buffer* const* args[1] = {in};
  PJRT_Buffer* outs0[1]; PJRT_Buffer** outs[1] = {outs0};
  PJRT_Event* done[1];
  PJRT_LoadedExecutable_Execute_Args ex; memset(&ex, 0, sizeof ex);
  ex.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE; ex.executable = cc.executable;
  ex.options = &eo; ex.argument_lists = args; ex.num_devices = 1; ex.num_args = 2;
  ex.output_lists = outs; ex.device_complete_events = done;
  check(api->PJRT_LoadedExecutable_Execute(&ex), "execute");
  PJRT_Event_Await_Args aw = {PJRT_Event_Await_Args_STRUCT_SIZE, NULL, done[0]};
  check(api->PJRT_Event_Await(&aw), "await");
  PJRT_Buffer_ToHostBuffer_Args th; memset(&th, 0, sizeof th);
  th.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE; th.src = outs0[0]; th.dst = out; th.dst_size = sizeof out;
  check(api->PJRT_Buffer_ToHostBuffer(&th), "to host");
  PJRT_Event_Await_Args aw2 = {PJRT_Event_Await_Args_STRUCT_SIZE, NULL, th.event};
  check(api->PJRT_Event_Await(&aw2), "await copy");
  printf("x + y * 2 = %g %g %g %g\n", out[0], out[1], out[2], out[3]);
  return 0;
}
