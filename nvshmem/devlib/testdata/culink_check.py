# culink_check.py ARCHIVE: links kernel PTX + devlib PTX + libnvshmem_device.a with the CUDA
# driver's JIT linker (cuLinkCreate / cuLinkAddData / cuLinkAddFile(CU_JIT_INPUT_LIBRARY) /
# cuLinkComplete), loads the module and looks the kernel up; then shows the errors of the
# three broken links (no devlib, no archive, a mistyped declaration). Needs a GPU, python3 and
# these files in the current folder:
#   kernel.ptx         testdata/link_kernel_sm90.ptx
#   kernel_90a.ptx     the same with .target sm_90a
#   kernel_badabi.ptx  the same with nvshmem_int_p's value declared and passed as .b64
#   devlib.ptx         kgen devlib --target sm_90 --funcs <the 10 functions the kernel calls>
# It launches nothing. See FACTS.md for what it printed on an H100.
import ctypes, hashlib, sys, time

cu = ctypes.CDLL("libcuda.so.1")


def err(r):
    s = ctypes.c_char_p()
    cu.cuGetErrorString(r, ctypes.byref(s))
    return f"{r} {s.value.decode() if s.value else ''}"


def chk(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: {err(r)}")


chk(cu.cuInit(0), "cuInit")
dev = ctypes.c_int()
chk(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ctx = ctypes.c_void_p()
chk(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
chk(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
mj, mn, drv = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
cu.cuDeviceGetAttribute(ctypes.byref(mj), 75, dev)  # COMPUTE_CAPABILITY_MAJOR
cu.cuDeviceGetAttribute(ctypes.byref(mn), 76, dev)  # COMPUTE_CAPABILITY_MINOR
cu.cuDriverGetVersion(ctypes.byref(drv))
print(f"device sm_{mj.value}{mn.value}, driver CUDA {drv.value}")
archive = sys.argv[1]
print("archive", archive, hashlib.sha256(open(archive, "rb").read()).hexdigest())

JIT_INFO_LOG_BUFFER, JIT_INFO_LOG_BUFFER_SIZE_BYTES = 3, 4
JIT_ERROR_LOG_BUFFER, JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 5, 6
JIT_INPUT_PTX, JIT_INPUT_LIBRARY = 1, 4


def link(kernel, devlib, use_archive=True):
    n = 1 << 16
    errbuf, infobuf = ctypes.create_string_buffer(n), ctypes.create_string_buffer(n)
    opts = (ctypes.c_int * 4)(JIT_ERROR_LOG_BUFFER, JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                              JIT_INFO_LOG_BUFFER, JIT_INFO_LOG_BUFFER_SIZE_BYTES)
    vals = (ctypes.c_void_p * 4)(ctypes.cast(errbuf, ctypes.c_void_p), ctypes.c_void_p(n),
                                 ctypes.cast(infobuf, ctypes.c_void_p), ctypes.c_void_p(n))
    st = ctypes.c_void_p()
    chk(cu.cuLinkCreate_v2(4, opts, vals, ctypes.byref(st)), "cuLinkCreate")
    t0 = time.time()
    try:
        for name in [kernel, devlib] if devlib else [kernel]:
            data = open(name, "rb").read() + b"\0"
            r = cu.cuLinkAddData_v2(st, JIT_INPUT_PTX, data, ctypes.c_size_t(len(data)), name.encode(), 0, None, None)
            if r:
                return f"cuLinkAddData({name}) failed: {err(r)}: {errbuf.value.decode().strip()}"
        if use_archive:
            r = cu.cuLinkAddFile_v2(st, JIT_INPUT_LIBRARY, archive.encode(), 0, None, None)
            if r:
                return f"cuLinkAddFile(archive) failed: {err(r)}: {errbuf.value.decode().strip()}"
        cub, sz = ctypes.c_void_p(), ctypes.c_size_t()
        r = cu.cuLinkComplete(st, ctypes.byref(cub), ctypes.byref(sz))
        if r:
            return f"cuLinkComplete failed: {err(r)}: {errbuf.value.decode().strip()}"
        took = time.time() - t0
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        chk(cu.cuModuleLoadData(ctypes.byref(mod), cub), "cuModuleLoadData")
        chk(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"kgen_devlib_link_test"), "cuModuleGetFunction")
        cu.cuModuleUnload(mod)
        return f"OK: linked in {took * 1000:.0f} ms, {sz.value}-byte cubin, kernel found"
    finally:
        cu.cuLinkDestroy(st)


for case in [("kernel.ptx", "devlib.ptx", True), ("kernel.ptx", "devlib.ptx", True),
             ("kernel_90a.ptx", "devlib.ptx", True), ("kernel.ptx", None, True),
             ("kernel.ptx", "devlib.ptx", False), ("kernel_badabi.ptx", "devlib.ptx", True)]:
    try:
        print(case, "->", link(*case))
    except Exception as e:  # report and go on to the next case
        print(case, "-> exception", e)
