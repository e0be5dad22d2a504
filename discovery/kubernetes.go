package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// KubeWatchConfig selects the replicas of a model in Kubernetes: the ready
// endpoints of a Service (its EndpointSlices), or the ready Pods an
// InferencePool (Gateway API Inference Extension, v1) selects.
type KubeWatchConfig struct {
	// Namespace of the Service or pool; default the credentials' own (the
	// service account's, or the kubeconfig context's), else "default".
	Namespace string `json:"namespace,omitempty"`
	// Service names the Service whose EndpointSlices are followed.
	Service string `json:"service,omitempty"`
	// InferencePool names the InferencePool whose Pods are followed
	// (exclusive with Service).
	InferencePool string `json:"inference_pool,omitempty"`
	// Port picks the port: with Service, the name of the Service's port
	// (or its number), needed when it has several; with InferencePool, one
	// of its targetPorts (default all of them, a replica each).
	Port string `json:"port,omitempty"`
	// Scheme of the replicas' URLs, http (default) or https; a Service
	// port's appProtocol http or https overrides it.
	Scheme string `json:"scheme,omitempty"`
	// MinBackoff and MaxBackoff bound the pause after a failed call, which
	// doubles on each failure; defaults 250ms and 10s.
	MinBackoff time.Duration `json:"min_backoff,omitempty"`
	MaxBackoff time.Duration `json:"max_backoff,omitempty"`
}

// KubeWatcher follows a model's replicas in the Kubernetes API with a
// list-and-watch over plain HTTP and JSON (see listWatch) and hands
// complete sets to its subscribers, keeping the last-known-good set while
// the API is unreachable.
type KubeWatcher struct {
	client *kubeClient
	cfg    KubeWatchConfig
	what   string // "service ns/name" or "inferencepool ns/name", for logs and status
	logger *zap.Logger

	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	started  bool
	stopOnce sync.Once

	published // the set found, its subscribers; its mu guards the fields below too
	failures  int
	relists   int
}

// NewKubeWatcher returns a watcher of wc through the API creds reach;
// Start runs it. logger may be nil.
func NewKubeWatcher(creds KubeCredentials, wc KubeWatchConfig, logger *zap.Logger) (*KubeWatcher, error) {
	if (wc.Service == "") == (wc.InferencePool == "") {
		return nil, errors.New("kubernetes source: name a service or an inference_pool (one of them)")
	}
	if wc.Scheme == "" {
		wc.Scheme = "http"
	}
	if wc.Scheme != "http" && wc.Scheme != "https" {
		return nil, fmt.Errorf("kubernetes source: scheme %q: want http or https", wc.Scheme)
	}
	if wc.InferencePool != "" && wc.Port != "" {
		if n, err := strconv.Atoi(wc.Port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("kubernetes source: port %q: an inference pool's target port is a number", wc.Port)
		}
	}
	if wc.MinBackoff <= 0 {
		wc.MinBackoff = DefaultMinBackoff
	}
	if wc.MaxBackoff <= 0 {
		wc.MaxBackoff = DefaultMaxBackoff
	}
	wc.MaxBackoff = max(wc.MaxBackoff, wc.MinBackoff)
	client, err := newKubeClient(creds)
	if err != nil {
		return nil, err
	}
	if wc.Namespace == "" {
		wc.Namespace = cmpOr(client.namespace, "default")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	what := "service " + wc.Namespace + "/" + wc.Service
	if wc.InferencePool != "" {
		what = "inferencepool " + wc.Namespace + "/" + wc.InferencePool
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &KubeWatcher{
		client: client, cfg: wc, what: what,
		logger:    logger.With(zap.String("kubernetes", what)),
		ctx:       ctx,
		cancel:    cancel,
		done:      make(chan struct{}),
		published: newPublished(),
	}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Start runs the watch in its own goroutines. Call it once.
func (w *KubeWatcher) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return
	}
	w.started = true
	if w.cfg.Service != "" {
		go w.runService()
	} else {
		go w.runPool()
	}
}

// Stop ends the watch, aborting calls in flight, and waits for it.
// Subscribers get no more calls. It is safe to call more than once.
func (w *KubeWatcher) Stop() {
	w.stopOnce.Do(func() {
		w.cancel()
		w.mu.Lock()
		started := w.started
		w.started = true // a Start after Stop does nothing
		w.subs = map[uint64]func([]Instance){}
		w.mu.Unlock()
		if started {
			<-w.done
		}
		w.client.transport.CloseIdleConnections()
	})
}

// Relists counts the lists made because the API answered 410 Gone.
func (w *KubeWatcher) Relists() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.relists
}

// Status implements Source.
func (w *KubeWatcher) Status() Status { return w.status("kubernetes", w.what) }

func (w *KubeWatcher) newListWatch(path string, q url.Values, changed func(map[string]json.RawMessage)) *listWatch {
	return &listWatch{client: w.client, path: path, query: q, changed: changed,
		connected: w.reachable,
		relisted:  func() { w.mu.Lock(); w.relists++; w.mu.Unlock() },
	}
}

func (w *KubeWatcher) runService() {
	defer close(w.done)
	lw := w.newListWatch("/apis/discovery.k8s.io/v1/namespaces/"+url.PathEscape(w.cfg.Namespace)+"/endpointslices",
		url.Values{"labelSelector": {"kubernetes.io/service-name=" + w.cfg.Service}},
		func(objects map[string]json.RawMessage) { w.update(w.fromSlices(objects)) })
	lw.run(w.ctx, w.cfg.MinBackoff, w.cfg.MaxBackoff, w.failed)
}

// runPool follows the pool, and the Pods its selector picks: a change of
// the selector or ports starts the Pods' watch again.
func (w *KubeWatcher) runPool() {
	defer close(w.done)
	specs := make(chan *poolSpec, 1)
	var last *poolSpec
	delivered := false
	pool := w.newListWatch("/apis/inference.networking.k8s.io/v1/namespaces/"+url.PathEscape(w.cfg.Namespace)+"/inferencepools",
		url.Values{"fieldSelector": {"metadata.name=" + w.cfg.InferencePool}},
		func(objects map[string]json.RawMessage) {
			spec := w.poolSpec(objects[w.cfg.InferencePool])
			if delivered && (last == nil && spec == nil || last != nil && spec != nil && last.equal(spec)) {
				return // a change (a status, a relist) that selects the same Pods
			}
			delivered, last = true, spec
			select { // keep only the latest spec
			case <-specs:
			default:
			}
			specs <- spec
		})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pool.run(w.ctx, w.cfg.MinBackoff, w.cfg.MaxBackoff, w.failed)
	}()
	defer wg.Wait()
	var stopPods context.CancelFunc = func() {}
	podsDone := make(chan struct{})
	close(podsDone)
	for {
		select {
		case <-w.ctx.Done():
			stopPods()
			<-podsDone
			return
		case spec := <-specs:
			stopPods()
			<-podsDone
			if spec == nil { // no such pool (or none valid): no replicas
				w.update(nil)
				stopPods, podsDone = func() {}, closedChan()
				continue
			}
			var ctx context.Context
			ctx, stopPods = context.WithCancel(w.ctx)
			podsDone = make(chan struct{})
			pods := w.newListWatch("/api/v1/namespaces/"+url.PathEscape(w.cfg.Namespace)+"/pods",
				url.Values{"labelSelector": {spec.selector}},
				func(objects map[string]json.RawMessage) { w.update(w.fromPods(objects, spec.ports)) })
			go func(done chan struct{}) {
				defer close(done)
				pods.run(ctx, w.cfg.MinBackoff, w.cfg.MaxBackoff, w.failed)
			}(podsDone)
		}
	}
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// poolSpec is what the watcher reads of an InferencePool.
type poolSpec struct {
	selector string // matchLabels as a label selector, sorted
	ports    []int
}

func (p *poolSpec) equal(o *poolSpec) bool {
	return p.selector == o.selector && slices.Equal(p.ports, o.ports)
}

// poolSpec reads the pool's selector and target ports; nil (logged) when
// the pool is missing or unusable.
func (w *KubeWatcher) poolSpec(raw json.RawMessage) *poolSpec {
	if raw == nil {
		w.logger.Warn("inference pool not found; no replicas")
		return nil
	}
	var pool struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			TargetPorts []struct {
				Number int `json:"number"`
			} `json:"targetPorts"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &pool); err != nil {
		w.logger.Warn("inference pool unreadable; no replicas", zap.Error(err))
		return nil
	}
	labels := pool.Spec.Selector.MatchLabels
	if len(labels) == 0 {
		// An empty selector would pick every Pod of the namespace.
		w.logger.Warn("inference pool has no selector labels; no replicas")
		return nil
	}
	var terms []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		terms = append(terms, k+"="+labels[k])
	}
	spec := &poolSpec{selector: strings.Join(terms, ",")}
	want, _ := strconv.Atoi(w.cfg.Port)
	for _, p := range pool.Spec.TargetPorts {
		if p.Number > 0 && p.Number <= 65535 && (want == 0 || p.Number == want) {
			spec.ports = append(spec.ports, p.Number)
		}
	}
	if len(spec.ports) == 0 {
		w.logger.Warn("inference pool has no usable target port; no replicas", zap.String("port", w.cfg.Port))
		return nil
	}
	return spec
}

// endpointSlice is what the watcher reads of an EndpointSlice.
type endpointSlice struct {
	AddressType string `json:"addressType"`
	Endpoints   []struct {
		Addresses  []string `json:"addresses"`
		Conditions struct {
			Ready *bool `json:"ready"`
		} `json:"conditions"`
		Zone      string `json:"zone"`
		TargetRef *struct {
			Name string `json:"name"`
		} `json:"targetRef"`
	} `json:"endpoints"`
	Ports []struct {
		Name        *string `json:"name"`
		Port        *int    `json:"port"`
		AppProtocol *string `json:"appProtocol"`
	} `json:"ports"`
}

// fromSlices converts the Service's slices to instances: its ready
// endpoints (a terminating or not-ready endpoint gets no new requests) on
// the chosen port.
func (w *KubeWatcher) fromSlices(objects map[string]json.RawMessage) []Instance {
	var out []Instance
	for name, raw := range objects {
		var s endpointSlice
		if err := json.Unmarshal(raw, &s); err != nil {
			w.logger.Warn("endpoint slice unreadable; skipped", zap.String("slice", name), zap.Error(err))
			continue
		}
		port, scheme, ok := w.slicePort(name, &s)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			// A nil ready is "unknown", which consumers take as ready.
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			if len(ep.Addresses) == 0 {
				continue
			}
			// Every address of an endpoint is the same Pod: use the first.
			addr := net.JoinHostPort(ep.Addresses[0], strconv.Itoa(port))
			id := addr
			if ep.TargetRef != nil && ep.TargetRef.Name != "" {
				id = ep.TargetRef.Name + "@" + addr
			}
			out = append(out, Instance{ID: w.cfg.Namespace + "/" + id, URL: scheme + "://" + addr,
				Address: addr, Scheme: scheme, Zone: ep.Zone})
		}
	}
	return normalize(out)
}

// slicePort picks the slice's port as configured, and the scheme.
func (w *KubeWatcher) slicePort(slice string, s *endpointSlice) (int, string, bool) {
	want := w.cfg.Port
	byNumber, _ := strconv.Atoi(want)
	var names []string
	for i, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		names = append(names, cmpOr(name, strconv.Itoa(*p.Port)))
		if !(want == "" && len(s.Ports) == 1) && name != want && (byNumber == 0 || *p.Port != byNumber) {
			continue
		}
		scheme := w.cfg.Scheme
		if ap := s.Ports[i].AppProtocol; ap != nil && (*ap == "http" || *ap == "https") {
			scheme = *ap
		}
		return *p.Port, scheme, true
	}
	if len(s.Endpoints) > 0 {
		if want == "" {
			w.logger.Warn("the service has several ports (or none): name one with `port`; slice skipped",
				zap.String("slice", slice), zap.Strings("ports", names))
		} else {
			w.logger.Warn("the service has no such port; slice skipped",
				zap.String("slice", slice), zap.String("port", want), zap.Strings("ports", names))
		}
	}
	return 0, "", false
}

// fromPods converts the selected Pods to instances: those with an IP and
// the Ready condition, not being deleted, one per target port.
func (w *KubeWatcher) fromPods(objects map[string]json.RawMessage, ports []int) []Instance {
	var out []Instance
	for name, raw := range objects {
		var pod struct {
			objectMeta
			Status struct {
				PodIP      string `json:"podIP"`
				Conditions []struct {
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(raw, &pod); err != nil {
			w.logger.Warn("pod unreadable; skipped", zap.String("pod", name), zap.Error(err))
			continue
		}
		if pod.Metadata.DeletionTimestamp != nil || pod.Status.PodIP == "" {
			continue // a terminating Pod drains: no new requests
		}
		ready := false
		for _, c := range pod.Status.Conditions {
			if c.Type == "Ready" {
				ready = c.Status == "True"
			}
		}
		if !ready {
			continue
		}
		for _, port := range ports {
			addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port))
			out = append(out, Instance{ID: w.cfg.Namespace + "/" + name + "@" + addr, URL: w.cfg.Scheme + "://" + addr,
				Address: addr, Scheme: w.cfg.Scheme})
		}
	}
	return normalize(out)
}

// reachable clears the error state once the API answers again.
func (w *KubeWatcher) reachable() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failures > 0 {
		w.logger.Info("kubernetes API reachable again", zap.Int("failed_calls", w.failures))
	}
	w.lastErr, w.failures, w.lastSync = nil, 0, time.Now()
}

func (w *KubeWatcher) failed(err error, backoff time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastErr = err
	w.failures++
	// Log the first failure and then every 10th, not every retry.
	if w.failures == 1 || w.failures%10 == 0 {
		w.logger.Warn("kubernetes API call failed; keeping the last-known-good replicas",
			zap.Error(err), zap.Int("failures", w.failures), zap.Int("replicas", len(w.current)),
			zap.Duration("retry_in", backoff))
	}
}

func (w *KubeWatcher) update(list []Instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastSync = time.Now()
	w.deliver(list, w.logger, "kubernetes")
}

var _ Source = (*KubeWatcher)(nil)
