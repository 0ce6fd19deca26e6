// Command inferscale-service is a small HTTP memory service over an inferscale
// store, the library's model runtime, embedder and engine: each user's
// facts are added as text (encoded once into pre-RoPE KV with their
// embedding), and questions are answered with the best facts injected.
// JSON over HTTP on the loopback interface.
//
//	inferscale-service -store /tmp/memory.infs
//
//	POST /facts  {"namespace":"maya","facts":["Maya has a cat named Biscuit.", {"text":"...","metadata":{"date":"2024-05-01"}}]}
//	             -> {"ids":[...]}
//	POST /ask    {"namespace":"maya","question":"What is the name of Maya's cat?","k":4,"max_tokens":32}
//	             -> {"answer":"...","fact_ids":[...],"scores":[...],"tokens":n,"timings_ms":{...}}
//
// and the raw endpoints for engines that compute KV themselves:
//
//	POST   /v1/users/{user}/facts       {"tokens":[...],"embedding":[...],"k":"<base64>","v":"<base64>","text":"..."}
//	GET    /v1/users/{user}/facts       {"ids":[...]}
//	GET    /v1/users/{user}/facts/{id}  the fact (?kv=1 adds K and V)
//	DELETE /v1/users/{user}/facts/{id}
//	POST   /v1/users/{user}/retrieve    {"embedding":[...],"k":5} -> {"hits":[{"id":..,"score":..,"text":".."}]}
//	GET    /v1/stats
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "inferscale-service:", err)
		os.Exit(1)
	}
}

// cacheDir is where scripts/fetch-models.sh puts the models: $INFS_CACHE,
// or ~/.cache/inferscale.
func cacheDir() string {
	if dir := os.Getenv("INFS_CACHE"); dir != "" {
		return dir
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "inferscale")
}

// run loads the models, opens (or creates) the store and serves until ctx is
// done; then it stops accepting, lets the requests in flight finish (for up
// to -shutdown-timeout) and closes the engine, the store and the models.
// The log (one line per request) goes to logw. ready, if not nil, receives
// the address it listens on.
func run(ctx context.Context, args []string, logw io.Writer, ready func(addr string)) (err error) {
	fs := flag.NewFlagSet("inferscale-service", flag.ContinueOnError)
	fs.SetOutput(logw)
	path := fs.String("store", "", "store file, created for the model if it does not exist (required)")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address (port 0: any free port)")
	remote := fs.String("remote", "", "redis://host:port of a Redis or Valkey server holding the facts, the store file "+
		"its cache: instances sharing one server answer the same users (docs/scale-out.md)")
	modelPath := fs.String("model", filepath.Join(cacheDir(), "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
		"model (GGUF or safetensors) that encodes facts and answers")
	embedderPath := fs.String("embedder", filepath.Join(cacheDir(), "minilm"), "sentence-transformers embedder directory")
	dtype := fs.String("kv-dtype", "f16", "KV dtype of the store and the engine: f32, f16 or bf16")
	ctxTokens := fs.Uint("ctx", 2048, "tokens of the engine's cache (prompt and answer)")
	grace := fs.Duration("shutdown-timeout", 10*time.Second, "how long requests in flight may finish at shutdown")
	batchSize := fs.Int("batch", 32, "most /ask questions the engine runs together (continuous batching; 1: one at a time)")
	window := fs.Duration("batch-window", 5*time.Millisecond,
		"how long an /ask waits for others to join its batch when the engine is idle")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" {
		return errors.New("-store is required")
	}
	if *batchSize < 1 || *batchSize > 4096 || *window < 0 {
		return fmt.Errorf("-batch %d is not in 1..4096 or -batch-window %v is negative", *batchSize, *window)
	}
	kvDType, ok := map[string]inferscale.DType{"f32": inferscale.F32, "f16": inferscale.F16, "bf16": inferscale.BF16}[*dtype]
	if !ok {
		return fmt.Errorf("unknown -kv-dtype %q", *dtype)
	}
	log := slog.New(slog.NewTextHandler(logw, nil))

	// Everything opened is closed on the way out, the store after the
	// engine, the models last.
	var closers []io.Closer
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i].Close())
		}
	}()
	model, err := inferscale.LoadModel(*modelPath, nil)
	if err != nil {
		return fmt.Errorf("loading the model: %w", err)
	}
	closers = append(closers, model)
	embedder, err := inferscale.LoadEmbedder(*embedderPath, nil)
	if err != nil {
		return fmt.Errorf("loading the embedder: %w", err)
	}
	closers = append(closers, embedder)
	// The store's geometry (layers, heads, RoPE) and identity are the
	// model's: a new store is created with them, an existing one must have
	// them (ErrMismatch otherwise).
	g, err := model.Geometry(kvDType)
	if err != nil {
		return err
	}
	g.EmbedDim = uint32(embedder.Dim())
	identity, err := model.Identity(kvDType)
	if err != nil {
		return err
	}
	store, err := inferscale.Open(*path, &inferscale.Options{Create: true, Geometry: &g, Identity: identity,
		Remote: *remote})
	if err != nil {
		return err
	}
	closers = append(closers, store)
	// MaxSeqs > 1: the engine batches AskBatch's questions on the CPU, over
	// a block pool whose pages are mapped as sequences first use them.
	engine, err := inferscale.NewEngine(model, inferscale.EngineOptions{Ctx: uint32(*ctxTokens), KVDType: kvDType,
		MaxSeqs: uint32(*batchSize)})
	if err != nil {
		return err
	}
	closers = append(closers, engine)
	if err := engine.Prepare(store); err != nil {
		return err
	}
	factLimit, err := engine.FactLimit()
	if err != nil {
		return err
	}
	// Closed before the engine, once the HTTP server has let its handlers finish.
	asker := newBatcher(engine, store, embedder, *batchSize, *window)
	closers = append(closers, asker)
	tok, err := model.Tokenizer()
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	s := &server{store: store, model: model, embedder: embedder, engine: engine, tok: tok, asker: asker,
		ctx: *ctxTokens, factLimit: factLimit}
	srv := &http.Server{Handler: accessLog(log, s.routes()), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	log.Info("listening", "addr", ln.Addr().String(), "store", *path, "identity", identity, "batch", *batchSize,
		"batch_window", *window, "fact_limit", factLimit)
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", *grace)
	shutdown, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		// Requests still running when the time is up: their connections
		// are closed; the store's Close waits for a call in flight.
		log.Warn("requests still in flight at the shutdown timeout", "err", err)
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

// accessLog logs one line per request: method, path, status, duration and
// the bytes of the response body.
func accessLog(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rw := &recorder{ResponseWriter: w}
		h.ServeHTTP(rw, r)
		if rw.status == 0 {
			rw.status = http.StatusOK
		}
		log.Info("request", "method", r.Method, "path", r.URL.Path, "status", rw.status,
			"duration", time.Since(start), "bytes", rw.bytes)
	})
}

// recorder is a ResponseWriter that remembers the status and counts bytes.
type recorder struct {
	http.ResponseWriter
	status, bytes int
}

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}
