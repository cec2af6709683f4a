//go:build amd64

package amxtest

// LoadConfig executes ldtilecfg (%rax) with rax = cfg.
//
//go:noescape
func LoadConfig(cfg *[64]byte)

// StoreConfig executes sttilecfg (%rax) with rax = cfg.
//
//go:noescape
func StoreConfig(cfg *[64]byte)

// LoadConfigInline executes a RIP-relative ldtilecfg of InlineConfig, which is embedded in
// the function's code.
func LoadConfigInline()

// InlineConfig is the configuration LoadConfigInline loads: palette 1, tmm0 5 rows of 12
// bytes, tmm7 16 rows of 64 bytes, the other tiles unused.
var InlineConfig = [64]byte{0: 1, 16: 12, 30: 64, 48: 5, 55: 16}

// Release executes tilerelease.
func Release()

// The Gemm functions compute C += A·B on one tile triple: ldtilecfg cfg; load A, B and C
// (rows of A and C strideA/strideC bytes apart, rows of B strideB bytes apart); the dot
// product instruction; store C; tilerelease. The shapes come from cfg alone.

// GemmSSD uses tmm1 = A (r8 + r9*1), tmm2 = B (r10 + r11*1), tmm0 = C (r13 + r12*1, disp8 0)
// and tdpbssd %tmm2,%tmm1,%tmm0.
//
//go:noescape
func GemmSSD(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)

// GemmSUD uses tmm4 = A (rsi + rdx*1 with disp8 0x40), tmm5 = B (rdi + rbx*4 with disp32
// 0x1000), tmm3 = C (rcx + r8*2) and tdpbsud %tmm5,%tmm4,%tmm3. strideB must be a multiple of
// 4 and strideC a multiple of 2.
//
//go:noescape
func GemmSUD(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)

// GemmUSD uses tileloaddt1 tmm6 = A (r12 + r9*1), tmm7 = B (r11 + r10*1), tmm5 = C
// (rdx + rsi*1) and tdpbusd %tmm7,%tmm6,%tmm5.
//
//go:noescape
func GemmUSD(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)

// GemmUUD uses tmm0 = A (rsi + rdx*1), tmm7 = B (rdi + rbx*1), tmm6 = C (rcx + r8*1) and
// tdpbuud %tmm7,%tmm0,%tmm6.
//
//go:noescape
func GemmUUD(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)

// GemmBF16 uses tmm2 = A (rsi + rdx*1), tmm3 = B (rdi + rbx*1), tmm1 = C (rcx + r8*1) and
// tdpbf16ps %tmm3,%tmm2,%tmm1.
//
//go:noescape
func GemmBF16(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)

// LoadABC loads tmm1 = A, tmm2 = B and tmm0 = C with the addressing of GemmSSD, on the
// configuration loaded before on this thread.
//
//go:noescape
func LoadABC(a, b, c *byte, strideA, strideB, strideC int)

// DotSSD executes tdpbssd %tmm2,%tmm1,%tmm0 on the tile state of this thread.
func DotSSD()

// StoreC stores tmm0 to c with the addressing of GemmSSD (tilestored %tmm0,0x0(%r13,%r12,1)).
//
//go:noescape
func StoreC(c *byte, strideC int)

// ZeroTile loads cfg, loads tmm4 from src (rdx + rsi*1), executes tilezero %tmm4, stores tmm4
// to dst (rdi + rsi*1) and releases the tiles.
//
//go:noescape
func ZeroTile(cfg *[64]byte, src, dst *byte, stride int)

// LoadBroadcast loads cfg, loads tmm3 from src with a SIB byte without index register (stride
// 0: every row is src's first row), stores tmm3 to dst (rdi + rsi*1) and releases the tiles.
//
//go:noescape
func LoadBroadcast(cfg *[64]byte, src, dst *byte, stride int)

// UD2 executes ud2, an illegal instruction that is not AMX.
func UD2()
