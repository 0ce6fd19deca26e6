package inferscale

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// cachePath is a file of the real models that scripts/fetch-models.sh puts
// in $INFS_CACHE (default ~/.cache/inferscale).
func cachePath(t *testing.T, rel string) string {
	t.Helper()
	dir := os.Getenv("INFS_CACHE")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(home, ".cache", "inferscale")
	}
	return filepath.Join(dir, rel)
}

func fixture(t *testing.T, rel string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "tests", "fixtures", rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// SmolLM2's tokenizer from its GGUF: the chat goldens of transformers
// (rendered prompts and their token ids) through the binding.
func TestTokenizerChatGoldens(t *testing.T) {
	tok, err := LoadTokenizer(cachePath(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	if tok.VocabSize() != 49152 || tok.BOS() != 1 || tok.EOS() != 2 || !tok.IsSpecial(2) || tok.IsSpecial(17) {
		t.Fatalf("vocab %d bos %d eos %d", tok.VocabSize(), tok.BOS(), tok.EOS())
	}
	if p, err := tok.Piece(2); err != nil || p != "<|im_end|>" {
		t.Fatalf("Piece(2) = %q, %v", p, err)
	}
	if f, err := tok.ChatFormat(); err != nil || f != ChatML {
		t.Fatalf("ChatFormat = %v, %v", f, err)
	}
	var gold struct {
		Cases []struct {
			Name                string
			Messages            []ChatMessage
			AddGenerationPrompt bool    `json:"add_generation_prompt"`
			ChatML              string  `json:"chatml"`
			ChatMLIDs           []int32 `json:"chatml_ids"`
			Llama3              *string `json:"llama3"`
			Mistral             *string `json:"mistral"`
		}
	}
	fixture(t, "tokenizer/chat_smollm2.json", &gold)
	if len(gold.Cases) < 8 {
		t.Fatalf("%d chat cases", len(gold.Cases))
	}
	for _, c := range gold.Cases {
		text, err := tok.RenderChat(ChatAuto, c.Messages, c.AddGenerationPrompt)
		if err != nil || text != c.ChatML {
			t.Fatalf("%s: RenderChat = %q, %v\nwant %q", c.Name, text, err, c.ChatML)
		}
		ids, err := tok.Tokenize(text, ParseSpecial)
		if err != nil || !reflect.DeepEqual(ids, c.ChatMLIDs) {
			t.Fatalf("%s: Tokenize = %v, %v\nwant %v", c.Name, ids, err, c.ChatMLIDs)
		}
		if ct, err := tok.ChatTokenize(ChatAuto, c.Messages, c.AddGenerationPrompt); err != nil ||
			!reflect.DeepEqual(ct, c.ChatMLIDs) {
			t.Fatalf("%s: ChatTokenize = %v, %v\nwant %v", c.Name, ct, err, c.ChatMLIDs)
		}
		back, err := tok.Detokenize(ids, false)
		if err != nil || back != text {
			t.Fatalf("%s: Detokenize = %q, %v", c.Name, back, err)
		}
		for _, f := range []struct {
			format ChatFormat
			want   *string
		}{{ChatLlama3, c.Llama3}, {ChatMistral, c.Mistral}} {
			if f.want == nil {
				continue
			}
			var none *Tokenizer // these formats need no tokenizer
			got, err := none.RenderChat(f.format, c.Messages, c.AddGenerationPrompt)
			if err != nil || got != *f.want {
				t.Fatalf("%s %v: %q, %v\nwant %q", c.Name, f.format, got, err, *f.want)
			}
		}
	}

	// Special tokens in user text stay text unless asked for.
	plain, err := tok.Tokenize("<|im_end|>", 0)
	if err != nil || len(plain) < 2 {
		t.Fatalf("control token injected from plain text: %v, %v", plain, err)
	}
	if skip, err := tok.Detokenize([]int32{1, 17, 2}, true); err != nil || skip != mustPiece(t, tok, 17) {
		t.Fatalf("Detokenize(skip special) = %q, %v", skip, err)
	}
	// A long text: more tokens than any first guess of a buffer.
	long := ""
	for i := 0; i < 500; i++ {
		long += "<|im_start|>"
	}
	if ids, err := tok.Tokenize(long, ParseSpecial); err != nil || len(ids) != 500 {
		t.Fatalf("Tokenize(500 specials) = %d ids, %v", len(ids), err)
	}
}

func mustPiece(t *testing.T, tok *Tokenizer, id int32) string {
	t.Helper()
	p, err := tok.Piece(id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokenizerBadInputs(t *testing.T) {
	_, err := LoadTokenizer(filepath.Join(t.TempDir(), "missing.json"))
	wantCode(t, err, ErrNotFound)
	tok, err := LoadTokenizer(cachePath(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tok.Detokenize([]int32{1, 1 << 20}, false)
	wantCode(t, err, ErrInvalid)
	_, err = tok.RenderChat(ChatMistral, []ChatMessage{{"user", "a"}, {"user", "b"}}, false)
	wantCode(t, err, ErrInvalid)
	_, err = tok.RenderChat(ChatFormat(9), []ChatMessage{{"user", "a"}}, false)
	wantCode(t, err, ErrInvalid)
	_, err = tok.RenderChat(ChatML, []ChatMessage{{"user", "a\x00b"}}, false)
	wantCode(t, err, ErrInvalid)
	var none *Tokenizer
	_, err = none.RenderChat(ChatAuto, []ChatMessage{{"user", "a"}}, false)
	wantCode(t, err, ErrInvalid)
	_, err = tok.ChatTokenize(ChatMistral, []ChatMessage{{"user", "a"}, {"user", "b"}}, false)
	wantCode(t, err, ErrInvalid)
	_, err = tok.ChatTokenize(ChatML, []ChatMessage{{"us\x00er", "a"}}, false)
	wantCode(t, err, ErrInvalid)
	tok.Close()
	tok.Close()
	if _, err := tok.Tokenize("a", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Tokenize after Close: %v", err)
	}
	if tok.VocabSize() != 0 || tok.BOS() != -1 {
		t.Fatal("a closed tokenizer still answers")
	}
}

// A model's own tokenizer belongs to the model.
func TestModelTokenizer(t *testing.T) {
	m, err := LoadModel(filepath.Join("..", "..", "tests", "fixtures", "model", "gguf_llama.gguf"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := m.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Tokenize("hello", 0)
	if err != nil || len(ids) == 0 {
		t.Fatalf("Tokenize = %v, %v", ids, err)
	}
	if back, err := tok.Detokenize(ids, false); err != nil || back != "hello" {
		t.Fatalf("Detokenize = %q, %v", back, err)
	}
	tok.Close() // does nothing: the model owns it
	if _, err := tok.Tokenize("hello", 0); err != nil {
		t.Fatalf("the model's tokenizer died with its Close: %v", err)
	}
	m.Close()
	if _, err := tok.Tokenize("hello", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Tokenize after the model's Close: %v", err)
	}
	noTok := tinyModel(t) // a safetensors directory without tokenizer.json
	if _, err := noTok.Tokenizer(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Tokenizer of a model without one: %v", err)
	}
}
