package discovery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// KubeCredentials says how to reach the Kubernetes API. With no Kubeconfig
// the gateway runs in the cluster: the API is at KUBERNETES_SERVICE_HOST and
// _PORT, and its service account's token, CA and namespace are the files
// under /var/run/secrets/kubernetes.io/serviceaccount.
type KubeCredentials struct {
	// Kubeconfig is the path of a kubeconfig file (token or client
	// certificate users; exec and auth-provider plugins are not run).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context names the kubeconfig's context; default its current-context.
	Context string `json:"context,omitempty"`
}

// serviceAccountDir holds the in-cluster credentials; a variable for tests.
var serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// kubeClient is what the watcher needs of the API: a base URL, an HTTP
// client trusting the cluster's CA, and a bearer token (re-read from its
// file, as the kubelet rotates projected service account tokens).
type kubeClient struct {
	base      string
	http      *http.Client
	transport *http.Transport
	// namespace is the credentials' own (the service account's, or the
	// kubeconfig context's), the default of a watch.
	namespace string

	token     string
	tokenFile string
	tokenMu   sync.Mutex
	tokenRead time.Time
}

// tokenReread is how often a token file is read again.
const tokenReread = time.Minute

func newKubeClient(c KubeCredentials) (*kubeClient, error) {
	if c.Kubeconfig == "" {
		return inClusterClient()
	}
	return kubeconfigClient(c.Kubeconfig, c.Context)
}

func inClusterClient() (*kubeClient, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("kubernetes: not in a cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT unset) and no kubeconfig given")
	}
	ca, err := os.ReadFile(filepath.Join(serviceAccountDir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("kubernetes in-cluster CA: %w", err)
	}
	tlsConf, err := tlsConfig(ca, false, "")
	if err != nil {
		return nil, err
	}
	k := newClient("https://"+net.JoinHostPort(host, port), tlsConf)
	k.tokenFile = filepath.Join(serviceAccountDir, "token")
	if _, err := k.bearer(); err != nil {
		return nil, err
	}
	if ns, err := os.ReadFile(filepath.Join(serviceAccountDir, "namespace")); err == nil {
		k.namespace = strings.TrimSpace(string(ns))
	}
	return k, nil
}

// kubeconfig is the part of a kubeconfig file this client reads.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Clusters       []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server                   string `yaml:"server"`
			CertificateAuthority     string `yaml:"certificate-authority"`
			CertificateAuthorityData string `yaml:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `yaml:"insecure-skip-tls-verify"`
			TLSServerName            string `yaml:"tls-server-name"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			Token                 string         `yaml:"token"`
			TokenFile             string         `yaml:"tokenFile"`
			ClientCertificate     string         `yaml:"client-certificate"`
			ClientCertificateData string         `yaml:"client-certificate-data"`
			ClientKey             string         `yaml:"client-key"`
			ClientKeyData         string         `yaml:"client-key-data"`
			Exec                  map[string]any `yaml:"exec"`
			AuthProvider          map[string]any `yaml:"auth-provider"`
		} `yaml:"user"`
	} `yaml:"users"`
	Contexts []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster   string `yaml:"cluster"`
			User      string `yaml:"user"`
			Namespace string `yaml:"namespace"`
		} `yaml:"context"`
	} `yaml:"contexts"`
}

func kubeconfigClient(path, context string) (*kubeClient, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(raw, &kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if context == "" {
		context = kc.CurrentContext
	}
	dir := filepath.Dir(path)
	rel := func(p string) string { // paths in a kubeconfig are relative to it
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	ctxIdx := -1
	for i, c := range kc.Contexts {
		if c.Name == context {
			ctxIdx = i
		}
	}
	if ctxIdx < 0 {
		return nil, fmt.Errorf("kubeconfig %s: no context %q", path, context)
	}
	kctx := kc.Contexts[ctxIdx].Context
	var k *kubeClient
	for _, c := range kc.Clusters {
		if c.Name != kctx.Cluster {
			continue
		}
		ca, err := pemOf(c.Cluster.CertificateAuthorityData, rel(c.Cluster.CertificateAuthority))
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s cluster %q CA: %w", path, c.Name, err)
		}
		if c.Cluster.Server == "" {
			return nil, fmt.Errorf("kubeconfig %s cluster %q: no server", path, c.Name)
		}
		tlsConf, err := tlsConfig(ca, c.Cluster.InsecureSkipTLSVerify, c.Cluster.TLSServerName)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s cluster %q: %w", path, c.Name, err)
		}
		k = newClient(strings.TrimRight(c.Cluster.Server, "/"), tlsConf)
	}
	if k == nil {
		return nil, fmt.Errorf("kubeconfig %s: context %q names cluster %q, which it does not hold", path, context, kctx.Cluster)
	}
	k.namespace = kctx.Namespace
	found := false
	for _, u := range kc.Users {
		if u.Name != kctx.User {
			continue
		}
		found = true
		if u.User.Exec != nil || u.User.AuthProvider != nil {
			return nil, fmt.Errorf("kubeconfig %s user %q: exec and auth-provider credentials are not supported; use a token or a client certificate (e.g. a service account's token)", path, u.Name)
		}
		k.token, k.tokenFile = u.User.Token, rel(u.User.TokenFile)
		cert, err := pemOf(u.User.ClientCertificateData, rel(u.User.ClientCertificate))
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s user %q client certificate: %w", path, u.Name, err)
		}
		key, err := pemOf(u.User.ClientKeyData, rel(u.User.ClientKey))
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s user %q client key: %w", path, u.Name, err)
		}
		if cert != nil || key != nil {
			pair, err := tls.X509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("kubeconfig %s user %q client certificate: %w", path, u.Name, err)
			}
			k.transport.TLSClientConfig.Certificates = []tls.Certificate{pair}
		}
	}
	if !found && kctx.User != "" {
		return nil, fmt.Errorf("kubeconfig %s: context %q names user %q, which it does not hold", path, context, kctx.User)
	}
	return k, nil
}

// pemOf returns inline base64 data, else the file's content, else nil.
func pemOf(data, file string) ([]byte, error) {
	if data != "" {
		return base64.StdEncoding.DecodeString(data)
	}
	if file != "" {
		return os.ReadFile(file)
	}
	return nil, nil
}

func tlsConfig(ca []byte, insecure bool, serverName string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure, ServerName: serverName}
	if ca != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("no PEM certificate in the CA")
		}
		conf.RootCAs = pool
	}
	return conf, nil
}

func newClient(base string, tlsConf *tls.Config) *kubeClient {
	t := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	// No client timeout: a watch lasts minutes. Every call has a context
	// deadline, and a watch an idle timer (see watchOnce).
	return &kubeClient{base: base, http: &http.Client{Transport: t}, transport: t}
}

// bearer returns the token, re-reading its file at most once a minute.
func (k *kubeClient) bearer() (string, error) {
	if k.tokenFile == "" {
		return k.token, nil
	}
	k.tokenMu.Lock()
	defer k.tokenMu.Unlock()
	if k.token != "" && time.Since(k.tokenRead) < tokenReread {
		return k.token, nil
	}
	b, err := os.ReadFile(k.tokenFile)
	if err != nil {
		if k.token != "" {
			return k.token, nil // keep the last one read
		}
		return "", fmt.Errorf("kubernetes token: %w", err)
	}
	k.token, k.tokenRead = strings.TrimSpace(string(b)), time.Now()
	return k.token, nil
}

// apiError is an answer other than 200, with the API's Status message.
type apiError struct {
	Code    int
	Reason  string
	Message string
}

func (e *apiError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("kubernetes API: %d %s: %s", e.Code, e.Reason, e.Message)
	}
	return fmt.Sprintf("kubernetes API: %d", e.Code)
}

// gone reports a 410 Gone: the resourceVersion is too old, relist.
func gone(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Code == http.StatusGone
}

func (k *kubeClient) get(ctx context.Context, path string, q url.Values) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	token, err := k.bearer()
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, statusError(resp.StatusCode, body)
	}
	return resp, nil
}

// statusError reads a metav1.Status body.
func statusError(code int, body []byte) error {
	var st struct {
		Code    int    `json:"code"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &st)
	if st.Code == 0 {
		st.Code = code
	}
	return &apiError{Code: st.Code, Reason: st.Reason, Message: st.Message}
}
