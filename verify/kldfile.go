package verify

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gquant/gquant/formats/half"
	"github.com/gquant/gquant/internal/atomicfile"
)

// The reference log-probabilities file of llama-perplexity (--kl-divergence-base), also verify's
// own cache (tools/perplexity/perplexity.cpp):
//
//	"_logits_", u32 n_ctx, i32 n_vocab, i32 n_chunk, i32 tokens[n_chunk·n_ctx]
//	per chunk, per scored position (n_ctx − 1 − n_ctx/2 of them): a row of 2·⌈n_vocab/2⌉ + 4 uint16:
//	  float32 scale, float32 min_log_prob (the first 4 uint16), then q[i] for each vocabulary entry,
//	  log p_i ≈ scale·q[i] + min_log_prob.
//
// All numbers little-endian. llama.cpp reads exactly that much and ignores what follows; gquant
// appends an optional trailer there:
//
//	"_gqverif", u32 version (1), u32 flags (bit 0: logits present), u64 n, n bytes of JSON (KLDMeta),
//	then, with bit 0, the reference logits as fp16, n_chunk·scored·n_vocab of them, in row order.

const (
	kldMagic      = "_logits_"
	trailerMagic  = "_gqverif"
	trailerV1     = 1
	flagLogits    = 1
	kldHeaderSize = 8 + 4 + 4 + 4
	maxMetaJSON   = 64 << 20
)

// KLDMeta is the JSON inside gquant's trailer.
type KLDMeta struct {
	GquantVersion string `json:"gquant_version,omitempty"`
	Reference     string `json:"reference,omitempty"` // the reference model's path as given
	// Architecture is the reference's architecture and dimensions (arch.StatsModel's tensor
	// digest, and in words): an artifact of another one is refused.
	Architecture     string         `json:"architecture_sha256,omitempty"`
	ArchitectureDesc string         `json:"architecture,omitempty"`
	Greedy           *GreedyRefData `json:"greedy,omitempty"`
}

// GreedyRefData holds the reference's greedy continuations, so greedy reproductions need no
// reference model.
type GreedyRefData struct {
	Gen     int            `json:"gen"`
	Prompts []GreedyPrompt `json:"prompts"`
}

// GreedyPrompt is one prompt with its tokens and the reference's greedy continuation.
type GreedyPrompt struct {
	Text         string `json:"text"`
	Tokens       []int  `json:"tokens"`
	Continuation []int  `json:"continuation"`
}

// RowLen is the number of uint16 in one stored row for a vocabulary: 2·⌈vocab/2⌉ + 4.
func RowLen(vocab int) int { return 2*((vocab+1)/2) + 4 }

// RefRow is one stored row: the scale and minimum as two float32 in its first four uint16, then
// the quantized log-probabilities.
type RefRow []uint16

func (r RefRow) f32(i int) float32 {
	return math.Float32frombits(uint32(r[2*i]) | uint32(r[2*i+1])<<16)
}

// Scale returns the quantization step (in nats).
func (r RefRow) Scale() float32 { return r.f32(0) }

// MinLogProb returns the log-probability that q = 0 stands for.
func (r RefRow) MinLogProb() float32 { return r.f32(1) }

// LogProbs dequantizes the first len(dst) log-probabilities into dst in float32 arithmetic, as
// llama-perplexity does: scale·q + min.
func (r RefRow) LogProbs(dst []float64) {
	scale, mn := r.Scale(), r.MinLogProb()
	for i := range dst {
		dst[i] = float64(float32(scale*float32(r[4+i])) + mn)
	}
}

// QuantizeLogProbs stores the log-softmax of logits into row (len RowLen(len(logits))) with
// llama-perplexity's rule: log-probabilities are kept down to 16 nats below the top one, in 65535
// steps; anything at or below that floor is stored as 0.
func QuantizeLogProbs(row RefRow, logits []float32) {
	maxL, minL := logits[0], logits[0]
	for _, v := range logits[1:] {
		maxL = max(maxL, v)
		minL = min(minL, v)
	}
	minL = max(minL, maxL-16)
	var sum float64
	for _, v := range logits {
		sum += float64(float32(math.Exp(float64(v - maxL))))
	}
	lse := float32(math.Log(sum))
	minLogProb := (minL - maxL) - lse
	scale := (maxL - minL) / 65535
	putF32 := func(i int, f float32) {
		b := math.Float32bits(f)
		row[2*i], row[2*i+1] = uint16(b), uint16(b>>16)
	}
	putF32(0, scale)
	putF32(1, minLogProb)
	q := row[4:]
	clear(q)
	if scale == 0 {
		return
	}
	inv := 1 / scale
	for i, v := range logits {
		if v > minL {
			x := math.RoundToEven(float64(float32(inv * float32(v-minL))))
			q[i] = uint16(min(x, 65535))
		}
	}
}

// KLDFile is an open reference log-probabilities file.
type KLDFile struct {
	Path   string
	Ctx    int      // n_ctx of the windows
	Vocab  int      // n_vocab
	Chunks int      // number of windows
	Tokens []int    // Chunks·Ctx corpus tokens, as tokenized (BOS not substituted)
	Meta   *KLDMeta // gquant's trailer, nil for files without one (llama.cpp's)

	f         *os.File
	dataOff   int64
	logitsOff int64 // 0 when no logits are stored
	buf       []byte
}

// Scored is the number of stored rows per window, Ctx − 1 − Ctx/2.
func (k *KLDFile) Scored() int { return k.Ctx - 1 - k.Ctx/2 }

// HasLogits reports whether the file stores the reference logits (gquant's trailer).
func (k *KLDFile) HasLogits() bool { return k.logitsOff != 0 }

// OpenKLD opens and validates a reference log-probabilities file written by llama-perplexity
// (--kl-divergence-base) or by gquant verify --save-ref.
func OpenKLD(path string) (*KLDFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	k, err := openKLD(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return k, nil
}

func openKLD(f *os.File, path string) (*KLDFile, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	var hdr [kldHeaderSize]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return nil, fmt.Errorf("%s: header: file too short (%d bytes)", path, size)
	}
	if string(hdr[:8]) != kldMagic {
		return nil, fmt.Errorf("%s: header: not a log-probabilities file (magic %q, want %q)", path, hdr[:8], kldMagic)
	}
	nctx := int64(binary.LittleEndian.Uint32(hdr[8:]))
	nvocab := int64(int32(binary.LittleEndian.Uint32(hdr[12:])))
	nchunk := int64(int32(binary.LittleEndian.Uint32(hdr[16:])))
	var probs []string
	if nctx < 3 || nctx > 1<<24 {
		probs = append(probs, fmt.Sprintf("n_ctx: %d out of range [3, 2^24]", nctx))
	}
	if nvocab < 1 || nvocab > 1<<24 {
		probs = append(probs, fmt.Sprintf("n_vocab: %d out of range [1, 2^24]", nvocab))
	}
	if nchunk < 1 || nchunk > 1<<24 {
		probs = append(probs, fmt.Sprintf("n_chunk: %d out of range [1, 2^24]", nchunk))
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: header: %s", path, joinProblems(probs))
	}
	k := &KLDFile{Path: path, Ctx: int(nctx), Vocab: int(nvocab), Chunks: int(nchunk), f: f}
	nTok := nctx * nchunk
	k.dataOff = kldHeaderSize + 4*nTok
	dataEnd := k.dataOff + nchunk*int64(k.Scored())*int64(RowLen(k.Vocab))*2
	if size < dataEnd {
		return nil, fmt.Errorf("%s: log-probabilities: file is %d bytes, want at least %d for %d windows of %d tokens and a vocabulary of %d (truncated?)",
			path, size, dataEnd, nchunk, nctx, nvocab)
	}
	raw := make([]byte, 4*nTok)
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, fmt.Errorf("%s: tokens: %v", path, err)
	}
	k.Tokens = make([]int, nTok)
	bad := 0
	for i := range k.Tokens {
		t := int(int32(binary.LittleEndian.Uint32(raw[4*i:])))
		if t < 0 || t >= k.Vocab {
			bad++
		}
		k.Tokens[i] = t
	}
	if bad > 0 {
		return nil, fmt.Errorf("%s: tokens: %d token ids outside the vocabulary of %d", path, bad, k.Vocab)
	}
	if size > dataEnd {
		if err := k.readTrailer(dataEnd, size); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// readTrailer parses gquant's trailer at off in a file of the given size.
func (k *KLDFile) readTrailer(off, size int64) error {
	var h [24]byte
	if size-off < int64(len(h)) {
		return fmt.Errorf("%s: trailer: %d unexpected bytes after the log-probabilities", k.Path, size-off)
	}
	if _, err := k.f.ReadAt(h[:], off); err != nil {
		return fmt.Errorf("%s: trailer: %v", k.Path, err)
	}
	if string(h[:8]) != trailerMagic {
		return fmt.Errorf("%s: trailer: %d unexpected bytes after the log-probabilities (no %q trailer)", k.Path, size-off, trailerMagic)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != trailerV1 {
		return fmt.Errorf("%s: trailer: version %d, this gquant reads %d", k.Path, v, trailerV1)
	}
	flags := binary.LittleEndian.Uint32(h[12:])
	n := binary.LittleEndian.Uint64(h[16:])
	if n > maxMetaJSON || int64(n) > size-off-int64(len(h)) {
		return fmt.Errorf("%s: trailer: metadata length %d exceeds the file", k.Path, n)
	}
	js := make([]byte, n)
	if _, err := k.f.ReadAt(js, off+int64(len(h))); err != nil {
		return fmt.Errorf("%s: trailer: %v", k.Path, err)
	}
	k.Meta = &KLDMeta{}
	if err := json.Unmarshal(js, k.Meta); err != nil {
		return fmt.Errorf("%s: trailer: metadata: %v", k.Path, err)
	}
	end := off + int64(len(h)) + int64(n)
	if flags&flagLogits != 0 {
		k.logitsOff = end
		end += int64(k.Chunks) * int64(k.Scored()) * int64(k.Vocab) * 2
	}
	if end != size {
		return fmt.Errorf("%s: trailer: file is %d bytes, its trailer says %d", k.Path, size, end)
	}
	return nil
}

// ReadChunk returns the stored rows of window c (Scored of them). The rows share one buffer that
// the next call overwrites.
func (k *KLDFile) ReadChunk(c int) ([]RefRow, error) {
	nv := RowLen(k.Vocab)
	n := k.Scored() * nv
	u, err := k.readU16(k.dataOff+int64(c)*int64(n)*2, n)
	if err != nil {
		return nil, fmt.Errorf("%s: log-probabilities of window %d: %v", k.Path, c, err)
	}
	rows := make([]RefRow, k.Scored())
	for j := range rows {
		rows[j] = RefRow(u[j*nv : (j+1)*nv])
	}
	return rows, nil
}

// ReadChunkLogits returns the stored reference logits of window c (Scored·Vocab values), or nil
// when the file stores none.
func (k *KLDFile) ReadChunkLogits(c int) ([]float32, error) {
	if k.logitsOff == 0 {
		return nil, nil
	}
	n := k.Scored() * k.Vocab
	u, err := k.readU16(k.logitsOff+int64(c)*int64(n)*2, n)
	if err != nil {
		return nil, fmt.Errorf("%s: logits of window %d: %v", k.Path, c, err)
	}
	out := make([]float32, n)
	for i, h := range u {
		out[i] = half.F16ToF32(h)
	}
	return out, nil
}

func (k *KLDFile) readU16(off int64, n int) ([]uint16, error) {
	if cap(k.buf) < 2*n {
		k.buf = make([]byte, 2*n)
	}
	b := k.buf[:2*n]
	if _, err := k.f.ReadAt(b, off); err != nil {
		return nil, err
	}
	u := make([]uint16, n)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return u, nil
}

// Close closes the file.
func (k *KLDFile) Close() error { return k.f.Close() }

// KLDWriter writes a reference log-probabilities file: llama-perplexity's format plus gquant's
// trailer. The file appears under its name only when Close succeeds.
type KLDWriter struct {
	path      string
	f         *atomicfile.File
	w         *bufio.Writer
	spool     *os.File // fp16 logits, appended to the trailer at Close
	sw        *bufio.Writer
	vocab     int
	want, got int
	row       RefRow
	b         []byte
}

// CreateKLD starts a file for windows of ctx tokens over tokens (a multiple of ctx) and a
// vocabulary of vocab entries. With logits, the reference logits are kept too (fp16, in the trailer).
// An existing file is replaced only with force.
func CreateKLD(path string, ctx, vocab int, tokens []int, logits, force bool) (*KLDWriter, error) {
	if ctx < 3 || vocab < 1 || len(tokens) == 0 || len(tokens)%ctx != 0 {
		return nil, fmt.Errorf("%s: bad shape: ctx %d, vocab %d, %d tokens", path, ctx, vocab, len(tokens))
	}
	if err := atomicfile.CheckNew(path, force); err != nil {
		return nil, err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	w := &KLDWriter{path: path, f: f, w: bufio.NewWriterSize(f, 1<<20), vocab: vocab,
		want: len(tokens) / ctx * (ctx - 1 - ctx/2), row: make(RefRow, RowLen(vocab)), b: make([]byte, 2*RowLen(vocab))}
	if logits {
		// A scratch file beside the output, removed by Close or Abort; never renamed.
		if w.spool, err = atomicfile.CreateScratch(filepath.Dir(path), "."+filepath.Base(path)+".logits-*"); err != nil {
			w.Abort()
			return nil, err
		}
		w.sw = bufio.NewWriterSize(w.spool, 1<<20)
	}
	hdr := make([]byte, kldHeaderSize+4*len(tokens))
	copy(hdr, kldMagic)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(ctx))
	binary.LittleEndian.PutUint32(hdr[12:], uint32(vocab))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(len(tokens)/ctx))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(hdr[kldHeaderSize+4*i:], uint32(int32(t)))
	}
	if _, err := w.w.Write(hdr); err != nil {
		w.Abort()
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return w, nil
}

// WriteRow appends the next scored position's reference logits (len vocab).
func (w *KLDWriter) WriteRow(logits []float32) error {
	if len(logits) != w.vocab {
		return fmt.Errorf("%s: row of %d logits for a vocabulary of %d", w.path, len(logits), w.vocab)
	}
	if w.got == w.want {
		return fmt.Errorf("%s: more than the %d rows the header promises", w.path, w.want)
	}
	QuantizeLogProbs(w.row, logits)
	for i, v := range w.row {
		binary.LittleEndian.PutUint16(w.b[2*i:], v)
	}
	if _, err := w.w.Write(w.b); err != nil {
		return fmt.Errorf("%s: %v", w.path, err)
	}
	if w.sw != nil {
		var h [2]byte
		for _, v := range logits {
			binary.LittleEndian.PutUint16(h[:], half.F32ToF16(v))
			if _, err := w.sw.Write(h[:]); err != nil {
				return fmt.Errorf("%s: logits: %v", w.path, err)
			}
		}
	}
	w.got++
	return nil
}

// Close writes the trailer (meta may be nil when no logits are kept) and renames the file into
// place. On error nothing is left behind.
func (w *KLDWriter) Close(meta *KLDMeta) (err error) {
	defer func() {
		if err != nil {
			w.Abort()
		}
	}()
	if w.got != w.want {
		return fmt.Errorf("%s: %d rows written, the header promises %d", w.path, w.got, w.want)
	}
	if meta != nil || w.spool != nil {
		if meta == nil {
			meta = &KLDMeta{}
		}
		js, err := json.Marshal(meta)
		if err != nil {
			return err
		}
		var h [24]byte
		copy(h[:], trailerMagic)
		binary.LittleEndian.PutUint32(h[8:], trailerV1)
		if w.spool != nil {
			binary.LittleEndian.PutUint32(h[12:], flagLogits)
		}
		binary.LittleEndian.PutUint64(h[16:], uint64(len(js)))
		w.w.Write(h[:])
		w.w.Write(js)
		if w.spool != nil {
			if err := w.sw.Flush(); err != nil {
				return fmt.Errorf("%s: logits: %v", w.path, err)
			}
			if _, err := w.spool.Seek(0, io.SeekStart); err != nil {
				return err
			}
			if _, err := io.Copy(w.w, w.spool); err != nil {
				return fmt.Errorf("%s: logits: %v", w.path, err)
			}
		}
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("%s: %v", w.path, err)
	}
	if err := w.f.Commit(); err != nil {
		return err
	}
	w.dropSpool()
	return nil
}

// Abort removes the partial file. It does nothing after a successful Close.
func (w *KLDWriter) Abort() {
	w.f.Abort()
	w.dropSpool()
}

func (w *KLDWriter) dropSpool() {
	if w.spool != nil {
		atomicfile.DropScratch(w.spool)
		w.spool = nil
	}
}

// joinProblems joins several problems found by one check with "; ".
func joinProblems(p []string) string { return strings.Join(p, "; ") }
