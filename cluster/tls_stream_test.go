package cluster

import (
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-log/strata/security"
)

func TestARaftCallerThatSaysNothingIsCutOff(t *testing.T) {
	dir := t.TempDir()
	if err := security.WriteDevCerts(dir, security.DevCerts{Brokers: 2}); err != nil {
		t.Fatal(err)
	}
	load := func(id string) *security.Material {
		m, err := security.LoadMaterial(security.Files{CA: filepath.Join(dir, "ca.pem"),
			Cert: filepath.Join(dir, "broker-"+id+".pem"), Key: filepath.Join(dir, "broker-"+id+"-key.pem")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	anyBroker := security.RequireBroker(-1, security.DefaultCluster)
	b1, b2 := load("1"), load("2")
	layer, err := newTLSStreamLayer("127.0.0.1:0", nil, &TransportTLS{Server: b1.ServerConfig(true, anyBroker), Client: b1.ClientConfig(anyBroker)})
	if err != nil {
		t.Fatal(err)
	}
	defer layer.Close()
	layer.handshakeTimeout = 200 * time.Millisecond

	// A silent caller: its connection fails its first read once the
	// handshake deadline passes, instead of waiting for ever.
	silent, err := net.Dial("tcp", layer.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	c, err := layer.Accept()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 1)); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a read on a connection that never shook hands succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a caller that said nothing held its Raft connection")
	}

	// A broker's connection works both ways through the layer.
	go func() {
		cc, err := tls.Dial("tcp", layer.Addr().String(), b2.ClientConfig(anyBroker))
		if err == nil {
			cc.Write([]byte("x"))
			cc.Close()
		}
	}()
	c, err = layer.Accept()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil || buf[0] != 'x' {
		t.Fatalf("a broker's connection: read %q, %v", buf, err)
	}
}
