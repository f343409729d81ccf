/*
 * resizealloc.h: the C API of libresizealloc.so.
 *
 * Load the library with LD_PRELOAD (then it also serves malloc/free/...) or link against it.
 * Between resize_region_begin() and the matching resize_region_end(), every allocation of the
 * calling thread is served from that thread's resize arena: a bump buffer that grows in place
 * when it is too small and resizes itself to the region's peak at the outermost end.
 * Memory stays valid until it is freed, whether it escapes the region, crosses threads or
 * outlives its thread.
 */
#ifndef RESIZEALLOC_H
#define RESIZEALLOC_H

#include <stddef.h>
#include <sys/types.h> /* ssize_t */
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Figures of the calling thread's arena. */
struct resize_thread_stats {
    uint64_t arena_capacity;   /* bytes planned for the next region (what it resized to) */
    uint64_t arena_committed;  /* bytes readable/writable: capacity + overflow + pinned granules */
    uint64_t high_water;       /* bytes the last completed outermost region needed */
    uint64_t region_allocs;    /* allocations served by the arena */
    uint64_t overflow_allocs;  /* allocations that did not fit the capacity planned at region start */
    uint64_t spilled_allocs;   /* overflow allocations served by the next allocator */
    uint64_t resizes;          /* capacity changes */
    uint64_t region_depth;     /* current nesting depth */
};

/* Totals over every thread (arenas of exited threads included). */
struct resize_process_stats {
    uint64_t arena_capacity;
    uint64_t arena_committed;
    uint64_t high_water;       /* sum of the arenas' last peaks */
    uint64_t region_allocs;
    uint64_t overflow_allocs;
    uint64_t spilled_allocs;
    uint64_t resizes;
    uint64_t arenas_live;      /* arenas whose thread is alive */
    uint64_t arenas_orphaned;  /* thread exited while some of its blocks were still live */
    uint64_t arenas_denied;    /* threads that wanted an arena and got none */
    uint64_t reserved_bytes;   /* address space reserved for arenas (not memory in use) */
};

/* The memory bound and the lifetime predictor. Appended last: an older struct without it
 * (a smaller out_size) still gets the fields it knows. */
struct resize_memory_stats {
    uint64_t thread_resident;      /* bytes the thread's arena holds resident */
    uint64_t thread_live;          /* bytes of its live blocks (headers included; the blocks
                                      handed out since the last slow path or region end are
                                      added when the arena next counts them) */
    uint64_t process_resident;     /* bytes all arenas hold resident */
    uint64_t process_live;         /* bytes of all arenas' live blocks */
    uint64_t efficiency_permille;  /* process_live * 1000 / process_resident (1000 if none) */
    uint64_t granules_given_back;  /* 16 KiB granules given back to the kernel (madvise) */
    uint64_t bound_closures;       /* times an arena reached its memory bound and closed */
    uint64_t bytes_turned_away;    /* bytes the bound sent to the next allocator */
    uint64_t bytes_routed_away;    /* bytes the lifetime predictor sent to the next allocator */
    uint64_t sites_learned_long;   /* times an allocation site was learned long-lived */
    uint64_t sites_learned_short;  /* times a long-lived site was learned short-lived again */
    uint64_t sites_long_now;       /* sites routed to the next allocator now */
};

/* The small-block heap: where process mode sends every request of up to 1 KiB. Appended last,
 * like resize_memory_stats. */
struct resize_small_stats {
    uint64_t pages_in_use;      /* 64 KiB pages holding blocks or cached empty */
    uint64_t bytes_in_pages;    /* their address space (only carved 4 KiB pieces are resident) */
    uint64_t pages_given_back;  /* pages given back to the kernel (madvise) once empty */
    uint64_t pages_adopted;     /* pages another thread's heap took over */
};

struct resize_stats {
    struct resize_thread_stats thread;
    struct resize_process_stats process;
    struct resize_memory_stats memory;
    struct resize_small_stats small;
};

/* Enters a region on the calling thread. Regions nest. */
void resize_region_begin(void);

/* Leaves the innermost region: 0 on success, -1 if the thread is not in a region.
 * The outermost end resets the arena and resizes it to the region's peak. */
int resize_region_end(void);

/* Nesting depth of the calling thread (0 outside regions). */
int resize_region_depth(void);

/* Fills *out (at most out_size bytes; pass sizeof(struct resize_stats)).
 * Returns the size of the library's struct, or -1 if out is NULL. */
int resize_stats_get(struct resize_stats *out, size_t out_size);

/* Gives memory the calling thread's arena does not need back to the kernel, and the warm
 * memory kept by arenas of exited threads. */
void resize_trim(void);

/* The device pools behind cudaMalloc/cuMemAlloc (per CUDA context, sharded per thread), summed. */
struct resize_cuda_stats {
    uint64_t pools;            /* contexts with a pool (their shards count once) */
    uint64_t reserved;         /* bytes held from the driver */
    uint64_t in_use;           /* bytes in live blocks */
    uint64_t high_water;       /* sum of the pools' last region peaks */
    uint64_t overflow_blocks;  /* segments regions added beyond what the pools planned */
    uint64_t segments;         /* segments held now */
    uint64_t own_syncs;        /* synchronisations the pools did (one per batch of frees) */
    uint64_t observed_syncs;   /* synchronisations of the program the pools saw */
    uint64_t driver_allocs;    /* segments asked from the driver over the pools' life */
    uint64_t pressure_releases; /* segments given back for pressure (cap, idle, another allocation's OOM) */
    uint64_t capture_refusals; /* requests a stream capture sent to the driver (they needed a sync or a segment) */
};

/* Fills *out (at most out_size bytes; pass sizeof(struct resize_cuda_stats)).
 * Returns the size of the library's struct, or -1 if out is NULL. */
int resize_cuda_stats_get(struct resize_cuda_stats *out, size_t out_size);

/* Gives every cached device block back to the driver (after one synchronisation if frees are
 * in flight). Returns 0, or the first CUresult error. */
int resize_cuda_trim(void);

/* Plug-in allocators: the device pools for frameworks, without LD_PRELOAD (the library may be
 * opened with dlopen or ctypes). Every call is pooled whatever the region state; during a
 * stream capture the driver serves it; RESIZEALLOC_CUDA=off makes them plain driver calls.
 * The block comes from the pool of the device's context (the current one if it is that
 * device's, else its primary context). `stream` is a cudaStream_t / CUstream. */

/* PyTorch torch.cuda.memory.CUDAPluggableAllocator(path, "resize_torch_alloc", "resize_torch_free").
 * NULL on failure, for a negative size and for an unknown device. */
void *resize_torch_alloc(ssize_t size, int device, void *stream);
void resize_torch_free(void *ptr, ssize_t size, int device, void *stream);

/* CuPy cupy.cuda.memory.CFunctionAllocator(0, malloc_address, free_address, None). Not
 * stream-ordered: a freed block is reused after a synchronisation. NULL on failure. */
void *resize_cupy_malloc(void *param, size_t size, int device);
void resize_cupy_free(void *param, void *ptr, int device);

/* cuda.core MemoryResource and Numba external memory manager: stream-ordered allocation.
 * Return 0 or a CUDA error code: 1 (invalid value: NULL out, or a pointer that is not a live
 * block), 2 (out of memory), 101 (invalid device), or the driver's own. Size 0 gives NULL;
 * deallocating NULL does nothing. A block is reusable at once on the stream it was freed on,
 * elsewhere after a synchronisation. */
int resize_device_allocate(size_t size, int device, void *stream, void **out);
int resize_device_deallocate(void *ptr, size_t size, int device, void *stream);

/* "MAJOR.MINOR.PATCH" */
const char *resize_version(void);

#ifdef __cplusplus
}
#endif

#endif /* RESIZEALLOC_H */
