package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is one private redis-server on a free loopback port, nothing on
// disk: --save "" --appendonly no, in a temp dir removed by stop.
type server struct {
	cmd  *exec.Cmd
	dir  string
	addr string
	rdb  *redis.Client // the tool's own probe connection (INFO, SCAN, MEMORY USAGE)
}

func startRedis(bin string) (*server, error) {
	dir, err := os.MkdirTemp("", "peercost-redis-")
	if err != nil {
		return nil, err
	}
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &server{dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", port)}
		s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no",
			"--logfile", filepath.Join(dir, "redis.log"))
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the tool
		if err := s.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.rdb = redis.NewClient(&redis.Options{Addr: s.addr})
		ctx := context.Background()
		for i := 0; i < 100; i++ {
			if s.rdb.Ping(ctx).Err() == nil {
				return s, nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Lost the port to someone else, most likely: try another.
		s.rdb.Close()
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("redis-server did not start (log in %s)", dir)
}

func (s *server) stop() {
	s.rdb.Close()
	_ = s.cmd.Process.Kill() // the process this tool started, by its own handle
	_ = s.cmd.Wait()
	os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// info is one INFO reply as key → value, plus commandstats by command.
type info struct {
	fields map[string]string
	cmds   map[string]cmdStat
}

type cmdStat struct {
	calls int64
	usec  int64
}

func readInfo(ctx context.Context, rdb *redis.Client, sections ...string) (info, error) {
	s, err := rdb.Info(ctx, sections...).Result()
	if err != nil {
		return info{}, err
	}
	in := info{fields: map[string]string{}, cmds: map[string]cmdStat{}}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if name, ok := strings.CutPrefix(k, "cmdstat_"); ok {
			var st cmdStat
			for _, f := range strings.Split(v, ",") {
				if x, ok := strings.CutPrefix(f, "calls="); ok {
					st.calls, _ = strconv.ParseInt(x, 10, 64)
				}
				if x, ok := strings.CutPrefix(f, "usec="); ok {
					st.usec, _ = strconv.ParseInt(x, 10, 64)
				}
			}
			in.cmds[name] = st
			continue
		}
		in.fields[k] = v
	}
	return in, nil
}

func (in info) int(k string) int64 {
	v, _ := strconv.ParseInt(in.fields[k], 10, 64)
	return v
}

func (in info) cpu() float64 {
	u, _ := strconv.ParseFloat(in.fields["used_cpu_user"], 64)
	s, _ := strconv.ParseFloat(in.fields["used_cpu_sys"], 64)
	return u + s
}

// usedMemory reads used_memory after a settle: it waits until two reads a
// second apart agree within 0.1 % (client buffers shrink, lazy frees end),
// at most 5 s.
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	var last int64 = -1
	for i := 0; i < 6; i++ {
		time.Sleep(time.Second)
		in, err := readInfo(ctx, rdb, "memory")
		if err != nil {
			return 0, err
		}
		m := in.int("used_memory")
		if last >= 0 && abs(m-last)*1000 <= last {
			return m, nil
		}
		last = m
	}
	return last, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
