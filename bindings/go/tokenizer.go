package inferscale

/*
#include <inferscale/inferscale.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Tokenizer is a language model's byte-level BPE tokenizer and chat
// template, loaded on its own (LoadTokenizer) or owned by a Model
// (Model.Tokenizer). It is immutable: safe for concurrent use.
type Tokenizer struct {
	mu    sync.RWMutex // for a loaded tokenizer, as Store's
	c     *C.infs_tokenizer
	owner *Model // for a model's tokenizer: valid while the model is open
}

// LoadTokenizer loads the tokenizer of a .gguf model file, a Hugging Face
// tokenizer.json (with tokenizer_config.json beside it when present), or a
// directory holding those files.
func LoadTokenizer(path string) (*Tokenizer, error) {
	const op = "LoadTokenizer"
	if versionErr != nil {
		return nil, versionErr
	}
	cpath, err := cstring(op, "path", path)
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var c *C.infs_tokenizer
	if rc := C.infs_tokenizer_load(&c, charp(cpath)); rc != 0 {
		return nil, lastError(rc)
	}
	t := &Tokenizer{c: c}
	runtime.SetFinalizer(t, (*Tokenizer).Close)
	return t, nil
}

// Tokenizer is the model's own tokenizer and chat template. It belongs to
// the model: its Close does nothing, and its methods fail with ErrClosed
// once the model is closed. ErrNotFound when the model came without one.
func (m *Model) Tokenizer() (*Tokenizer, error) {
	const op = "Model.Tokenizer"
	c, err := m.acquire(op)
	if err != nil {
		return nil, err
	}
	defer m.release()
	tc := C.infs_model_tokenizer(c)
	if tc == nil {
		return nil, newError(ErrNotFound, op+": the model came without a tokenizer")
	}
	return &Tokenizer{c: tc, owner: m}, nil
}

// Close releases a loaded tokenizer, waiting for calls in flight; calling it
// again does nothing, nor does it for a model's tokenizer.
func (t *Tokenizer) Close() error {
	if t == nil || t.owner != nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c != nil {
		C.infs_tokenizer_free(t.c)
		t.c = nil
		runtime.SetFinalizer(t, nil)
	}
	return nil
}

func (t *Tokenizer) acquire(op string) (*C.infs_tokenizer, error) {
	if t == nil {
		return nil, closedError(op)
	}
	if t.owner != nil {
		if _, err := t.owner.acquire(op); err != nil {
			return nil, err
		}
		return t.c, nil
	}
	t.mu.RLock()
	if t.c == nil {
		t.mu.RUnlock()
		return nil, closedError(op)
	}
	return t.c, nil
}

func (t *Tokenizer) release() {
	if t.owner != nil {
		t.owner.release()
	} else {
		t.mu.RUnlock()
	}
	runtime.KeepAlive(t)
}

// TokenizeFlags change how text is tokenized.
type TokenizeFlags uint

const (
	// AddSpecial adds BOS (and EOS) where the model's configuration asks.
	AddSpecial TokenizeFlags = C.INFS_TOKENIZE_ADD_SPECIAL
	// ParseSpecial reads special tokens written in the text ("<|im_start|>")
	// as those tokens; without it user text cannot inject control tokens.
	ParseSpecial TokenizeFlags = C.INFS_TOKENIZE_PARSE_SPECIAL
)

// emptyText stands for "" in C calls that take a pointer and a length.
var emptyText = [1]byte{}

func textPtr(s string) *C.char {
	if len(s) == 0 {
		return (*C.char)(unsafe.Pointer(&emptyText[0]))
	}
	return (*C.char)(unsafe.Pointer(unsafe.StringData(s)))
}

// Tokenize gives the token ids of text, as Hugging Face tokenizers does
// (ill-formed UTF-8 is read as U+FFFD).
func (t *Tokenizer) Tokenize(text string, flags TokenizeFlags) ([]int32, error) {
	const op = "Tokenizer.Tokenize"
	c, err := t.acquire(op)
	if err != nil {
		return nil, err
	}
	defer t.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Byte-level BPE gives at most one token per byte, plus BOS and EOS: the
	// first guess fits, and the count of a too small buffer sizes the retry.
	out := make([]int32, len(text)+4)
	for {
		var n C.size_t
		rc := C.infs_tokenize(c, textPtr(text), C.size_t(len(text)), C.unsigned(flags),
			(*C.infs_token)(unsafe.Pointer(unsafe.SliceData(out))), C.size_t(len(out)), &n)
		if rc == C.INFS_ERANGE && int(n) > len(out) {
			out = make([]int32, int(n))
			continue
		}
		if rc != 0 {
			return nil, lastError(rc)
		}
		return out[:n:n], nil
	}
}

// Detokenize gives the bytes the tokens stand for, concatenated. A sequence
// cut inside a character gives a partial UTF-8 sequence.
func (t *Tokenizer) Detokenize(tokens []int32, skipSpecial bool) (string, error) {
	const op = "Tokenizer.Detokenize"
	c, err := t.acquire(op)
	if err != nil {
		return "", err
	}
	defer t.release()
	var flags C.unsigned
	if skipSpecial {
		flags = C.INFS_DETOKENIZE_SKIP_SPECIAL
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	out := make([]byte, 8*len(tokens)+1)
	for {
		var n C.size_t
		rc := C.infs_detokenize(c, (*C.infs_token)(unsafe.Pointer(unsafe.SliceData(tokens))), C.size_t(len(tokens)),
			flags, (*C.char)(unsafe.Pointer(&out[0])), C.size_t(len(out)), &n)
		if rc == C.INFS_ERANGE && int(n)+1 > len(out) {
			out = make([]byte, int(n)+1)
			continue
		}
		if rc != 0 {
			return "", lastError(rc)
		}
		return string(out[:n]), nil
	}
}

// Piece gives the bytes of one token.
func (t *Tokenizer) Piece(token int32) (string, error) {
	const op = "Tokenizer.Piece"
	c, err := t.acquire(op)
	if err != nil {
		return "", err
	}
	defer t.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	out := make([]byte, 64)
	for {
		var n C.size_t
		rc := C.infs_token_to_piece(c, C.infs_token(token), (*C.char)(unsafe.Pointer(&out[0])), C.size_t(len(out)), &n)
		if rc == C.INFS_ERANGE && int(n)+1 > len(out) {
			out = make([]byte, int(n)+1)
			continue
		}
		if rc != 0 {
			return "", lastError(rc)
		}
		return string(out[:n]), nil
	}
}

// BOS is the beginning-of-sequence token, -1 when there is none (or the
// tokenizer is closed).
func (t *Tokenizer) BOS() int32 {
	c, err := t.acquire("Tokenizer.BOS")
	if err != nil {
		return -1
	}
	defer t.release()
	return int32(C.infs_tokenizer_bos(c))
}

// EOS is the end-of-sequence token, -1 when there is none (or the tokenizer
// is closed).
func (t *Tokenizer) EOS() int32 {
	c, err := t.acquire("Tokenizer.EOS")
	if err != nil {
		return -1
	}
	defer t.release()
	return int32(C.infs_tokenizer_eos(c))
}

// VocabSize is the number of token ids (0 once closed).
func (t *Tokenizer) VocabSize() int {
	c, err := t.acquire("Tokenizer.VocabSize")
	if err != nil {
		return 0
	}
	defer t.release()
	return int(C.infs_tokenizer_vocab_size(c))
}

// IsSpecial reports whether token is a special (control) token.
func (t *Tokenizer) IsSpecial(token int32) bool {
	c, err := t.acquire("Tokenizer.IsSpecial")
	if err != nil {
		return false
	}
	defer t.release()
	return C.infs_tokenizer_is_special(c, C.infs_token(token)) != 0
}

// ChatFormat is a chat prompt format.
type ChatFormat int

const (
	ChatAuto    ChatFormat = C.INFS_CHAT_AUTO    // the tokenizer's own template
	ChatML      ChatFormat = C.INFS_CHAT_CHATML  // <|im_start|>role\ncontent<|im_end|>\n
	ChatLlama3  ChatFormat = C.INFS_CHAT_LLAMA3  // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
	ChatMistral ChatFormat = C.INFS_CHAT_MISTRAL // <s>[INST] user [/INST]assistant</s>
)

// ChatFormat is the format of the tokenizer's chat template (ChatML when it
// has none; ErrUnsupported for a template of no known format).
func (t *Tokenizer) ChatFormat() (ChatFormat, error) {
	c, err := t.acquire("Tokenizer.ChatFormat")
	if err != nil {
		return 0, err
	}
	defer t.release()
	var f C.infs_chat_format
	if err := check(func() C.int { return C.infs_chat_format_detect(c, &f) }); err != nil {
		return 0, err
	}
	return ChatFormat(f), nil
}

// ChatMessage is one turn of a chat.
type ChatMessage struct {
	Role    string // "system", "user", "assistant"
	Content string
}

// RenderChat renders messages as the model's prompt text, as Hugging Face's
// apply_chat_template(tokenize=False) does; addGenerationPrompt ends it with
// the opening of an assistant turn. t may be nil when format is not
// ChatAuto. Tokenize the result with ParseSpecial and without AddSpecial.
func (t *Tokenizer) RenderChat(format ChatFormat, messages []ChatMessage, addGenerationPrompt bool) (string, error) {
	const op = "Tokenizer.RenderChat"
	var c *C.infs_tokenizer
	if t != nil {
		var err error
		if c, err = t.acquire(op); err != nil {
			return "", err
		}
		defer t.release()
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	cm, err := chatMessages(op, messages, &pin)
	if err != nil {
		return "", err
	}
	var flags C.unsigned
	if addGenerationPrompt {
		flags = C.INFS_CHAT_ADD_GENERATION_PROMPT
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	size := 256
	for _, m := range messages {
		size += len(m.Role) + len(m.Content) + 32
	}
	out := make([]byte, size)
	for {
		var n C.size_t
		rc := C.infs_chat_render(c, C.infs_chat_format(format), cm, C.size_t(len(messages)), flags,
			(*C.char)(unsafe.Pointer(&out[0])), C.size_t(len(out)), &n)
		if rc == C.INFS_ERANGE && int(n)+1 > len(out) {
			out = make([]byte, int(n)+1)
			continue
		}
		if rc != 0 {
			return "", lastError(rc)
		}
		return string(out[:n]), nil
	}
}

// ChatTokenize is RenderChat followed by Tokenize with ParseSpecial: the
// prompt's tokens in one call.
func (t *Tokenizer) ChatTokenize(format ChatFormat, messages []ChatMessage, addGenerationPrompt bool) ([]int32, error) {
	const op = "Tokenizer.ChatTokenize"
	var pin runtime.Pinner
	defer pin.Unpin()
	cm, err := chatMessages(op, messages, &pin)
	if err != nil {
		return nil, err
	}
	c, err := t.acquire(op)
	if err != nil {
		return nil, err
	}
	defer t.release()
	var flags C.unsigned
	if addGenerationPrompt {
		flags = C.INFS_CHAT_ADD_GENERATION_PROMPT
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	size := 16
	for _, m := range messages {
		size += len(m.Role) + len(m.Content) + 16
	}
	out := make([]int32, size)
	for {
		var n C.size_t
		rc := C.infs_chat_tokenize(c, C.infs_chat_format(format), cm, C.size_t(len(messages)), flags,
			(*C.infs_token)(unsafe.Pointer(unsafe.SliceData(out))), C.size_t(len(out)), &n)
		if rc == C.INFS_ERANGE && int(n) > len(out) {
			out = make([]int32, int(n))
			continue
		}
		if rc != 0 {
			return nil, lastError(rc)
		}
		return out[:n:n], nil
	}
}

// chatMessages is messages as a C array in Go memory holding pointers to
// NUL-terminated copies of the strings: all pinned by pin for the call.
func chatMessages(op string, messages []ChatMessage, pin *runtime.Pinner) (*C.infs_chat_message, error) {
	if len(messages) == 0 {
		return nil, nil
	}
	cm := make([]C.infs_chat_message, len(messages))
	for i, m := range messages {
		role, err := cstring(op, "role", m.Role)
		if err != nil {
			return nil, err
		}
		content, err := cstring(op, "content", m.Content)
		if err != nil {
			return nil, err
		}
		pin.Pin(&role[0])
		pin.Pin(&content[0])
		cm[i].role, cm[i].content = charp(role), charp(content)
	}
	pin.Pin(&cm[0])
	return &cm[0], nil
}

// String names the format.
func (f ChatFormat) String() string {
	switch f {
	case ChatAuto:
		return "auto"
	case ChatML:
		return "chatml"
	case ChatLlama3:
		return "llama3"
	case ChatMistral:
		return "mistral"
	}
	return fmt.Sprintf("ChatFormat(%d)", int(f))
}
