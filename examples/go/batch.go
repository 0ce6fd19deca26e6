package main

import (
	"context"
	"errors"
	"time"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

// batcher answers /ask requests through Engine.AskBatch: it collects the
// requests that arrive within a short window of the first one (or while the
// engine is busy), up to size, and hands each group of the same namespace
// and options to the engine in one call, whose continuous batching runs
// their questions together (one forward pass per step for all of them).
type batcher struct {
	engine   *inferscale.Engine
	store    *inferscale.Store
	embedder *inferscale.Embedder
	size     int
	window   time.Duration

	queue chan *askJob
	stop  chan struct{} // closed by Close: no more requests are taken
	done  chan struct{} // closed when the loop has answered its last request
}

// askJob is one request waiting for its answer.
type askJob struct {
	ns, question string
	k, maxTokens int
	reply        chan askResult // buffered: the loop never waits for a handler
}

type askResult struct {
	answer *inferscale.Answer
	err    error
}

// errStopping answers requests that arrive after Close (503).
var errStopping = errors.New("the service is shutting down: ask again once it is back")

func newBatcher(engine *inferscale.Engine, store *inferscale.Store, embedder *inferscale.Embedder, size int,
	window time.Duration) *batcher {
	b := &batcher{engine: engine, store: store, embedder: embedder, size: size, window: window,
		queue: make(chan *askJob, size), stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

// ask queues a question and waits for its answer, or for ctx (the client
// gone: the answer, computed anyway, is dropped).
func (b *batcher) ask(ctx context.Context, ns, question string, k, maxTokens int) (*inferscale.Answer, error) {
	j := &askJob{ns: ns, question: question, k: k, maxTokens: maxTokens, reply: make(chan askResult, 1)}
	select {
	case b.queue <- j:
	case <-b.stop:
		return nil, errStopping
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-j.reply:
		return r.answer, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops taking requests and returns once the requests already taken
// are answered; the engine may be closed then. Call it after the HTTP
// server has shut down, so that no handler still waits.
func (b *batcher) Close() error {
	close(b.stop)
	<-b.done
	return nil
}

func (b *batcher) loop() {
	defer close(b.done)
	for {
		var first *askJob
		select {
		case first = <-b.queue:
		case <-b.stop:
			b.drain()
			return
		}
		jobs := b.collect([]*askJob{first})
		b.run(jobs)
	}
}

// collect adds to jobs the requests that arrive within the window after the
// first one, up to size; those already waiting are taken at once.
func (b *batcher) collect(jobs []*askJob) []*askJob {
	timer := time.NewTimer(b.window)
	defer timer.Stop()
	for len(jobs) < b.size {
		select {
		case j := <-b.queue:
			jobs = append(jobs, j)
			continue
		default:
		}
		select {
		case j := <-b.queue:
			jobs = append(jobs, j)
		case <-timer.C:
			return jobs
		case <-b.stop:
			return jobs
		}
	}
	return jobs
}

// drain answers what was queued before Close.
func (b *batcher) drain() {
	for {
		select {
		case j := <-b.queue:
			b.run([]*askJob{j})
		default:
			return
		}
	}
}

// run answers jobs, one engine call per namespace and options (a call
// takes one namespace and one set of options), in the order of arrival.
// When a call fails, its questions are asked one by one, so that one bad
// request (a question the context cannot hold) fails alone.
func (b *batcher) run(jobs []*askJob) {
	type key struct {
		ns           string
		k, maxTokens int
	}
	var order []key
	groups := map[key][]*askJob{}
	for _, j := range jobs {
		g := key{j.ns, j.k, j.maxTokens}
		if groups[g] == nil {
			order = append(order, g)
		}
		groups[g] = append(groups[g], j)
	}
	for _, g := range order {
		group := groups[g]
		opts := &inferscale.AskOptions{K: g.k, MaxTokens: g.maxTokens}
		questions := make([]string, len(group))
		for i, j := range group {
			questions[i] = j.question
		}
		answers, err := b.engine.AskBatch(b.store, b.embedder, g.ns, questions, opts)
		if err != nil && len(group) > 1 && !errors.Is(err, inferscale.ErrClosed) {
			for _, j := range group {
				a, err := b.engine.AskBatch(b.store, b.embedder, g.ns, []string{j.question}, opts)
				if err != nil {
					j.reply <- askResult{err: err}
					continue
				}
				j.reply <- askResult{answer: a[0]}
			}
			continue
		}
		for i, j := range group {
			if err != nil {
				j.reply <- askResult{err: err}
				continue
			}
			j.reply <- askResult{answer: answers[i]}
		}
	}
}
