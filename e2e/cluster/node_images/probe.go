// The node tier's probe image: one static binary that a test runs as a pod on the real node.
//
// It prints a startup line (what `kubectl logs` must show) and serves HTTP on :8080:
//   - /         answers "probe <hostname>", so a test can reach the pod on its pod IP;
//   - /apiserver?path=P calls the API server the way an in-cluster client does (the
//     `kubernetes` Service from the environment, the pod's ServiceAccount token and CA) and
//     relays the status code, the address it dialled and the body of GET P (default /api).
//
// With a certificate in /tls (tls.crt, tls.key) it also serves HTTPS on :8443, where /validate
// is an admission webhook that denies objects labelled deny=true.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

const account = "/var/run/secrets/kubernetes.io/serviceaccount/"

func apiserver(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Query().Get("path")
	if path == "" {
		path = "/api"
	}
	token, err := os.ReadFile(account + "token")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ca, err := os.ReadFile(account + "ca.crt")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	host := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	req, _ := http.NewRequest(http.MethodGet, "https://"+host+path, nil)
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Fprintf(w, "%d %s\n%s", resp.StatusCode, host, body)
}

func validate(w http.ResponseWriter, r *http.Request) {
	var review map[string]any
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, _ := review["request"].(map[string]any)
	obj, _ := req["object"].(map[string]any)
	meta, _ := obj["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	allowed := labels["deny"] != "true"
	response := map[string]any{"uid": req["uid"], "allowed": allowed}
	if !allowed {
		response["status"] = map[string]any{"code": 403, "message": "denied by the probe webhook"}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response,
	})
}

func main() {
	hostname, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "probe %s\n", hostname)
	})
	http.HandleFunc("/apiserver", apiserver)
	http.HandleFunc("/validate", validate)
	if _, err := os.Stat("/tls/tls.crt"); err == nil {
		go func() {
			err := http.ListenAndServeTLS(":8443", "/tls/tls.crt", "/tls/tls.key", nil)
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}()
	}
	fmt.Printf("probe %s listening on :8080\n", hostname)
	if err := http.ListenAndServe(":8080", nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
