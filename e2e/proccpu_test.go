package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100
// on the architectures Strata is built for.
const userHZ = 100

// cpuTime is the CPU time, user and system, that process pid has used so
// far, read from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// count fields from the last ')'. utime and stime are fields 14 and 15.
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, s)
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuMeter adds up the CPU time a set of processes, by name, use over the
// phases it is started and stopped around.
type cpuMeter struct {
	b     testing.TB
	pids  map[string]int
	start map[string]time.Duration
	used  map[string]time.Duration
	wall  time.Duration
	began time.Time
}

func newCPUMeter(b testing.TB, pids map[string]int) *cpuMeter {
	return &cpuMeter{b: b, pids: pids, used: map[string]time.Duration{}}
}

func (m *cpuMeter) read() map[string]time.Duration {
	m.b.Helper()
	now := map[string]time.Duration{}
	for name, pid := range m.pids {
		d, err := cpuTime(pid)
		if err != nil {
			m.b.Fatalf("CPU time of %s: %v", name, err)
		}
		now[name] = d
	}
	return now
}

// begin starts a phase.
func (m *cpuMeter) begin() {
	m.b.Helper()
	m.start = m.read()
	m.began = time.Now()
}

// end ends the phase begin started, adding what it used.
func (m *cpuMeter) end() {
	m.b.Helper()
	m.wall += time.Since(m.began)
	for name, d := range m.read() {
		m.used[name] += d - m.start[name]
	}
}

// total is the CPU time all the processes used in the phases measured.
func (m *cpuMeter) total() time.Duration {
	var t time.Duration
	for _, d := range m.used {
		t += d
	}
	return t
}

// perGB is CPU seconds per GB of n bytes, of one process or ("") of all.
func (m *cpuMeter) perGB(name string, n int64) float64 {
	d := m.total()
	if name != "" {
		d = m.used[name]
	}
	return d.Seconds() / (float64(n) / 1e9)
}

// coresOf is how many of the machine's cores one process kept busy on
// average over the phases measured.
func (m *cpuMeter) coresOf(name string) float64 {
	return m.used[name].Seconds() / m.wall.Seconds()
}

// cores is how many of the machine's cores the processes kept busy on
// average over the phases measured.
func (m *cpuMeter) cores() float64 {
	return m.total().Seconds() / m.wall.Seconds()
}

func TestCPUTimeOfThisProcessGrows(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has counted two ticks more for this process:
	// its clock is in hundredths of a second.
	deadline := time.Now().Add(30 * time.Second)
	x := 0
	for {
		for i := range 1_000_000 {
			x ^= i
		}
		now, err := cpuTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now >= before+2*time.Second/userHZ {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed at %v, from %v, after 30 s of spinning (%d)", now, before, x)
		}
	}
	if _, err := cpuTime(0); err == nil {
		t.Fatal("cpuTime of pid 0: no error")
	}
}
