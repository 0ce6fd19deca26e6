// Command bench measures the example service's /ask throughput on the CPU:
// the same questions sent one by one and sent C at a time, over loopback,
// with the real models (SmolLM2 and MiniLM from $INFS_CACHE). It builds the
// service, starts two of them on their own stores with the same facts (the
// example memory): one answering one request at a time (-batch 1), one
// batching (-batch B), and runs rounds of both modes interleaved, so that a
// shared machine's load falls on both alike. It writes a JSON report.
//
//	cd examples/go && go run ./bench -out ../../benchmarks/results/go-service-cpu.json
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type report struct {
	Concurrency     int     `json:"concurrency"`
	ReqPerSBatched  float64 `json:"req_per_s_batched"`
	ReqPerSSerial   float64 `json:"req_per_s_serial"`
	Speedup         float64 `json:"speedup"`
	Rounds          int     `json:"rounds"`
	RequestsPerMode int     `json:"requests_per_round"`
	Errors          int     `json:"errors"`
	// Per round, in order: requests per second of each mode, and the
	// services' resident memory after the round.
	RoundsBatched []float64 `json:"rounds_req_per_s_batched"`
	RoundsSerial  []float64 `json:"rounds_req_per_s_serial"`
	RSSBatchedMiB []float64 `json:"rss_mib_batched_service"`
	RSSSerialMiB  []float64 `json:"rss_mib_serial_service"`
	// After the rounds: the batching service's resident memory after each
	// further wave of concurrency requests (memory flat under load).
	SoakRSSMiB     []float64 `json:"soak_rss_mib_batched_service"`
	LatencyBatched latency   `json:"latency_s_batched"`
	LatencySerial  latency   `json:"latency_s_serial"`
	Service        struct {
		Batch       int    `json:"batch"`
		BatchWindow string `json:"batch_window"`
		Ctx         int    `json:"ctx"`
		K           int    `json:"k"`
		MaxTokens   int    `json:"max_tokens"`
		Facts       int    `json:"facts"`
		Questions   int    `json:"questions"`
		Model       string `json:"model"`
		Embedder    string `json:"embedder"`
	} `json:"service"`
	Machine struct {
		Name      string `json:"name"`
		CPU       string `json:"cpu"`
		CPUs      int    `json:"cpus"`
		LoadStart string `json:"loadavg_start"`
		LoadEnd   string `json:"loadavg_end"`
		Go        string `json:"go"`
	} `json:"machine"`
	Command string `json:"command"`
	Date    string `json:"date"`
}

type latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	Max float64 `json:"max"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", filepath.Join("..", "..", "benchmarks", "results", "go-service-cpu.json"), "JSON report")
	concurrency := flag.Int("concurrency", 20, "requests in flight in the batched mode")
	requests := flag.Int("requests", 40, "requests of each mode per round")
	rounds := flag.Int("rounds", 3, "rounds (serial then batched, interleaved)")
	batch := flag.Int("batch", 32, "the batching service's -batch")
	window := flag.Duration("batch-window", 5*time.Millisecond, "the batching service's -batch-window")
	ctx := flag.Int("ctx", 2048, "the services' -ctx")
	k := flag.Int("k", 4, "facts per question")
	maxTokens := flag.Int("max-tokens", 32, "answer budget per question")
	machine := flag.String("machine", "", "what to call this machine in the report (default: its CPU)")
	soak := flag.Int("soak", 10, "waves of -concurrency requests sent to the batching service after the rounds, "+
		"its memory read after each")
	flag.Parse()
	if *concurrency < 1 || *requests < 1 || *rounds < 1 || *rounds > 100 || *requests > 10000 || *soak < 0 ||
		*soak > 1000 {
		return errors.New("-concurrency, -requests and -rounds must be positive (rounds <= 100, requests <= 10000), " +
			"-soak in 0..1000")
	}
	cache := os.Getenv("INFS_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "inferscale")
	}
	facts, questions, err := exampleMemory(filepath.Join("..", "memory"))
	if err != nil {
		return err
	}

	var r report
	r.Concurrency, r.Rounds, r.RequestsPerMode = *concurrency, *rounds, *requests
	r.Service.Batch, r.Service.BatchWindow, r.Service.Ctx = *batch, window.String(), *ctx
	r.Service.K, r.Service.MaxTokens, r.Service.Facts, r.Service.Questions = *k, *maxTokens, len(facts), len(questions)
	r.Service.Model = "SmolLM2-135M-Instruct.Q4_1.gguf"
	r.Service.Embedder = "all-MiniLM-L6-v2"
	r.Machine.CPU, r.Machine.CPUs, r.Machine.Go = cpuModel(), runtime.NumCPU(), runtime.Version()
	r.Machine.Name = *machine
	if r.Machine.Name == "" {
		r.Machine.Name = fmt.Sprintf("%d x %s", r.Machine.CPUs, r.Machine.CPU)
	}
	args := make([]string, len(os.Args)-1)
	for i, a := range os.Args[1:] {
		args[i] = a
		if strings.ContainsAny(a, " '\"$") {
			args[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	r.Command = strings.TrimSpace("cd examples/go && go run ./bench " + strings.Join(args, " "))
	r.Date = time.Now().UTC().Format(time.RFC3339)

	dir, err := os.MkdirTemp("", "inferscale-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "inferscale-service")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the service: %w", err)
	}
	common := []string{"-addr", "127.0.0.1:0", "-ctx", strconv.Itoa(*ctx)}
	serial, err := start(bin, append(common, "-store", filepath.Join(dir, "serial.infs"), "-batch", "1"))
	if err != nil {
		return err
	}
	defer serial.stop()
	batched, err := start(bin, append(common, "-store", filepath.Join(dir, "batched.infs"), "-batch",
		strconv.Itoa(*batch), "-batch-window", window.String()))
	if err != nil {
		return err
	}
	defer batched.stop()
	// A warm-up: the first requests touch the weights and, batched, the
	// block pool as a full wave of requests uses it.
	for _, w := range []struct {
		s *service
		c int
	}{{serial, 1}, {batched, *concurrency}} {
		if err := w.s.add(facts); err != nil {
			return err
		}
		qs := make([]string, max(2, w.c))
		for i := range qs {
			qs[i] = questions[i%len(questions)]
		}
		if _, _, failed := w.s.load(qs, w.c, *k, *maxTokens); failed > 0 {
			return fmt.Errorf("%d warm-up requests failed", failed)
		}
	}

	r.Machine.LoadStart = loadavg()
	var latB, latS []float64
	var totalB, totalS time.Duration
	for round := 0; round < *rounds; round++ {
		qs := make([]string, *requests)
		for i := range qs {
			qs[i] = questions[(round**requests+i)%len(questions)]
		}
		dS, lS, errS := serial.load(qs, 1, *k, *maxTokens)
		dB, lB, errB := batched.load(qs, *concurrency, *k, *maxTokens)
		r.Errors += errS + errB
		totalS += dS
		totalB += dB
		latS, latB = append(latS, lS...), append(latB, lB...)
		r.RoundsSerial = append(r.RoundsSerial, float64(len(qs))/dS.Seconds())
		r.RoundsBatched = append(r.RoundsBatched, float64(len(qs))/dB.Seconds())
		r.RSSSerialMiB = append(r.RSSSerialMiB, serial.rssMiB())
		r.RSSBatchedMiB = append(r.RSSBatchedMiB, batched.rssMiB())
		fmt.Fprintf(os.Stderr, "round %d: serial %.2f req/s, %d at a time %.2f req/s; RSS %.0f / %.0f MiB; errors %d\n",
			round+1, r.RoundsSerial[round], *concurrency, r.RoundsBatched[round], r.RSSSerialMiB[round],
			r.RSSBatchedMiB[round], errS+errB)
	}
	for wave := 0; wave < *soak; wave++ {
		qs := make([]string, *concurrency)
		for i := range qs {
			qs[i] = questions[(wave+i)%len(questions)]
		}
		_, _, failed := batched.load(qs, *concurrency, *k, *maxTokens)
		r.Errors += failed
		r.SoakRSSMiB = append(r.SoakRSSMiB, batched.rssMiB())
	}
	if *soak > 0 {
		fmt.Fprintf(os.Stderr, "soak: RSS after each wave %.0f MiB\n", r.SoakRSSMiB)
	}
	r.Machine.LoadEnd = loadavg()
	n := float64(*rounds * *requests)
	r.ReqPerSSerial, r.ReqPerSBatched = n/totalS.Seconds(), n/totalB.Seconds()
	r.Speedup = r.ReqPerSBatched / r.ReqPerSSerial
	r.LatencySerial, r.LatencyBatched = percentiles(latS), percentiles(latB)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("%d concurrent /ask: %.2f req/s batched, %.2f req/s one by one (%.2fx), %d errors; wrote %s\n",
		*concurrency, r.ReqPerSBatched, r.ReqPerSSerial, r.Speedup, r.Errors, *out)
	if r.Errors > 0 {
		return fmt.Errorf("%d requests failed", r.Errors)
	}
	return nil
}

// exampleMemory reads examples/memory: the facts' texts and the questions.
func exampleMemory(dir string) (facts, questions []string, err error) {
	for _, f := range []struct {
		file, key string
		dst       *[]string
	}{{"facts.jsonl", "text", &facts}, {"questions.jsonl", "question", &questions}} {
		b, err := os.ReadFile(filepath.Join(dir, f.file))
		if err != nil {
			return nil, nil, err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f.file, err)
			}
			if s, ok := m[f.key].(string); ok {
				*f.dst = append(*f.dst, s)
			}
		}
	}
	if len(facts) == 0 || len(questions) < 2 {
		return nil, nil, fmt.Errorf("%s holds %d facts and %d questions", dir, len(facts), len(questions))
	}
	return facts, questions, nil
}

// service is one running inferscale-service.
type service struct {
	cmd  *exec.Cmd
	base string
	hc   *http.Client
	done chan struct{} // its log read to the end
}

func start(bin string, args []string) (*service, error) {
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &service{cmd: cmd, hc: &http.Client{Timeout: 10 * time.Minute}, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() { // the log: the address, then read on (one line per request) and dropped
		defer close(s.done)
		for sc := bufio.NewScanner(stderr); sc.Scan(); {
			l := sc.Text()
			if _, after, ok := strings.Cut(l, "msg=listening addr="); ok {
				addr <- strings.Fields(after)[0]
			}
		}
	}()
	select {
	case a := <-addr:
		s.base = "http://" + a
		return s, nil
	case <-s.done:
		cmd.Wait()
		return nil, fmt.Errorf("%s %v exited before listening", bin, args)
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		return nil, fmt.Errorf("%s %v did not listen within 2 minutes", bin, args)
	}
}

func (s *service) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	<-s.done
	s.cmd.Wait()
}

func (s *service) post(path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	resp, err := s.hc.Post(s.base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

func (s *service) add(facts []string) error {
	status, raw, err := s.post("/facts", map[string]any{"namespace": "maya", "facts": facts})
	if err != nil || status != http.StatusCreated {
		return fmt.Errorf("POST /facts: %d %s %v", status, raw, err)
	}
	return nil
}

// load sends the questions with c in flight at a time and returns the wall
// time, each request's latency in seconds and the number that failed.
func (s *service) load(questions []string, c, k, maxTokens int) (time.Duration, []float64, int) {
	lat := make([]float64, len(questions))
	failed := make([]bool, len(questions))
	next := make(chan int, len(questions))
	for i := range questions {
		next <- i
	}
	close(next)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < min(c, len(questions)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := time.Now()
				status, raw, err := s.post("/ask", map[string]any{"namespace": "maya", "question": questions[i],
					"k": k, "max_tokens": maxTokens})
				lat[i] = time.Since(t).Seconds()
				if err != nil || status != http.StatusOK {
					failed[i] = true
					fmt.Fprintf(os.Stderr, "POST /ask: %d %s %v\n", status, raw, err)
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	for _, f := range failed {
		if f {
			n++
		}
	}
	return time.Since(start), lat, n
}

// rssMiB is the service's resident memory (VmRSS).
func (s *service) rssMiB() float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func percentiles(v []float64) latency {
	if len(v) == 0 {
		return latency{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	at := func(p float64) float64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return latency{P50: at(0.5), P95: at(0.95), Max: s[len(s)-1]}
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
		}
	}
	return runtime.GOARCH
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
