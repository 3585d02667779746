package main

import (
	"bufio"
	"strconv"
	"strings"
)

type sample struct {
	rss, heap, goroutines, fds, instances, spawns float64
}

func (l *load) sample() sample {
	resp, err := client.Get(l.d.url + "/metrics")
	if err != nil {
		l.fail("metrics", err)
		return sample{}
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, _ := strconv.ParseFloat(line[i+1:], 64)
		m[line[:i]] = v
	}
	return sample{
		rss:        m["process_resident_memory_bytes"],
		heap:       m["go_heap_objects_bytes"],
		goroutines: m["go_goroutines"],
		fds:        m["process_open_fds"],
		instances:  m[`sandbox_agent_instances{state="running"}`] + m[`sandbox_agent_instances{state="exited"}`],
		spawns:     m["sandbox_agent_agent_spawns_total"],
	}
}
