// Command memory-service is a small HTTP memory service over an inferscale
// store: each user's facts (caller-computed embedding and pre-RoPE KV) are
// added, listed, read, deleted and retrieved by a question's embedding,
// with JSON over HTTP on the loopback interface.
//
//	memory-service -store /tmp/memory.infs -create -layers 30 -kv-heads 3 \
//	    -head-dim 64 -embed-dim 384 -identity smollm2-135m
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
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		log.Fatal(err)
	}
}

// run serves until ctx is done, then shuts down and closes the store. ready,
// if not nil, receives the address it listens on.
func run(ctx context.Context, args []string, logw io.Writer, ready func(addr string)) error {
	fs := flag.NewFlagSet("memory-service", flag.ContinueOnError)
	fs.SetOutput(logw)
	path := fs.String("store", "", "store file (required)")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address (port 0: any free port)")
	create := fs.Bool("create", false, "create the store if it does not exist, with the geometry below")
	identity := fs.String("identity", "", "model/tokenizer/template identity of a new store")
	g := inferscale.DefaultGeometry()
	layers := fs.Uint("layers", 0, "layers of a new store")
	heads := fs.Uint("kv-heads", 0, "KV heads of a new store")
	headDim := fs.Uint("head-dim", 0, "head dim of a new store")
	rotaryDim := fs.Uint("rotary-dim", 0, "rotary dims of a new store (0: head dim)")
	fs.Float64Var(&g.RopeTheta, "rope-theta", g.RopeTheta, "RoPE theta of a new store")
	dtype := fs.String("kv-dtype", "f16", "KV dtype of a new store: f32, f16 or bf16")
	embedDim := fs.Uint("embed-dim", 0, "embedding size of a new store")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" {
		return errors.New("memory-service: -store is required")
	}

	opts := &inferscale.Options{Create: *create}
	if *create {
		g.Layers, g.KVHeads, g.HeadDim, g.EmbedDim = uint32(*layers), uint32(*heads), uint32(*headDim), uint32(*embedDim)
		g.RotaryDim = uint32(*rotaryDim)
		if g.RotaryDim == 0 {
			g.RotaryDim = g.HeadDim
		}
		switch *dtype {
		case "f32":
			g.KVDType = inferscale.F32
		case "f16":
			g.KVDType = inferscale.F16
		case "bf16":
			g.KVDType = inferscale.BF16
		default:
			return fmt.Errorf("memory-service: unknown -kv-dtype %q", *dtype)
		}
		opts.Geometry, opts.Identity = &g, *identity
	}
	store, err := inferscale.Open(*path, opts)
	if err != nil {
		return err
	}
	defer store.Close()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newServer(store), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(logw, "memory-service: %s (%s) on http://%s\n", *path, store.Identity(), ln.Addr())
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
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return store.Close()
}
