// Command latproxy puts a TCP proxy with a fixed latency in each direction in front of a
// server: toxiproxy (github.com/Shopify/toxiproxy/v2) embedded, with one `latency` toxic
// upstream and one downstream. bench/scenarios.sh runs it between sshfs and sshd.
//
// Usage: latproxy -listen 127.0.0.1:0 -upstream 127.0.0.1:PORT -latency 1ms [-addr-file F]
//
// It writes the address it listens on to -addr-file (or stdout) once it accepts, and runs
// until SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "address of the server behind the proxy")
	latency := flag.Duration("latency", time.Millisecond, "latency added in each direction")
	jitter := flag.Duration("jitter", 0, "latency jitter")
	addrFile := flag.String("addr-file", "", "write the listening address here (default stdout)")
	flag.Parse()
	if *upstream == "" {
		fmt.Fprintln(os.Stderr, "latproxy: -upstream is required")
		os.Exit(2)
	}
	if err := run(*listen, *upstream, *latency, *jitter, *addrFile); err != nil {
		fmt.Fprintln(os.Stderr, "latproxy:", err)
		os.Exit(1)
	}
}

func run(listen, upstream string, latency, jitter time.Duration, addrFile string) error {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	p := toxiproxy.NewProxy(srv, "bench", listen, upstream)
	if err := p.Start(); err != nil {
		return fmt.Errorf("start proxy: %w", err)
	}
	defer p.Stop()
	for _, dir := range []string{"upstream", "downstream"} {
		js := fmt.Sprintf(`{"name":"latency_%s","type":"latency","stream":%q,"toxicity":1,"attributes":{"latency":%d,"jitter":%d}}`,
			dir, dir, latency.Milliseconds(), jitter.Milliseconds())
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			return fmt.Errorf("add %s latency: %w", dir, err)
		}
	}
	line := p.Listen + "\n"
	if addrFile == "" {
		fmt.Print(line)
	} else if err := os.WriteFile(addrFile+".tmp", []byte(line), 0o644); err != nil {
		return err
	} else if err := os.Rename(addrFile+".tmp", addrFile); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}
