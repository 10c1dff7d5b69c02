// Package tune is kgen's autotuner: it times candidate configurations of a kernel (Go
// values: tiles, stages, options) on the device for one problem, keeps the fastest and
// caches its name on disk, so that later processes use it without timing anything.
//
// A Key names what a winner holds for: the device (backend, name, architecture,
// multiprocessor count, driver), the kernel family, the element types and a shape class
// (ExactShape by default; Pow2Shape buckets nearby shapes together). Tune times every
// Candidate with a Timer: Warmup untimed calls each, then Reps rounds over all candidates
// (interleaved, so a drift in clocks touches all alike), and keeps the one of the smallest
// median. A candidate whose Timer fails (a build, load or launch error) is skipped and
// reported in the Result; an error comes back only when none works or the context ends.
// Cached and Lookup read the cache and never time.
//
// The cache is one small JSON file per key in DefaultDir ($KGEN_TUNE_DIR, else the user
// cache folder's kgen/tune), written to a temporary file and renamed into place, so readers
// see a whole entry or none. Its folder must be private, like jit's cubin cache: one writable
// by group or others, or owned by another user, is refused. Only regular files are read
// (package internal/cachefile), never more than MaxEntry bytes; an entry that is damaged,
// names another key, or names no candidate is a miss, and the next Tune rewrites it.
//
// TuneGemm applies this to the sm_90a GEMM (kernels.GemmSM90Candidates) on a jit device,
// timed with CUDA events; GemmConfig is what the library calls to get a configuration: the
// cached winner if there is one, else kernels.GemmSM90For's estimate, never timing.
package tune
