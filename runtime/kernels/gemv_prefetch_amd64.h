// Software prefetch for the GEMV kernels (gemv_q8_amd64.s, gemv_k_amd64.s).

// PREFETCH_LINES_n prefetches n cache lines of weights pfDist bytes ahead of the group. Rows are
// contiguous, so this runs ahead across rows; it keeps more misses in flight than the
// out-of-order window alone, which matters for short rows (worth ~10% of bandwidth on one
// core with 1024-column rows).
#define pfDist 4096
#define PREFETCH_LINES_3 \
	PREFETCHT0 (pfDist)(R12)     \
	PREFETCHT0 (pfDist+64)(R12)  \
	PREFETCHT0 (pfDist+128)(R12)
#define PREFETCH_LINES_4 \
	PREFETCH_LINES_3             \
	PREFETCHT0 (pfDist+192)(R12)
#define PREFETCH_LINES_5 \
	PREFETCH_LINES_4             \
	PREFETCHT0 (pfDist+256)(R12)
#define PREFETCH_LINES_6 \
	PREFETCH_LINES_5             \
	PREFETCHT0 (pfDist+320)(R12)
#define PREFETCH_LINES_9 \
	PREFETCH_LINES_6             \
	PREFETCHT0 (pfDist+384)(R12) \
	PREFETCHT0 (pfDist+448)(R12) \
	PREFETCHT0 (pfDist+512)(R12)
