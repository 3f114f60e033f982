#!/bin/bash
# Paired closed-loop runs of memory-2tb and approx-2tb (bench/rules, bench/lib/node-load.mjs 4x16 in count mode:
# every request answered, no open-loop pile-up), alternated, a fresh sluice each run; Redis script calls per request
# from INFO commandstats. For a host where `npm run bench` cannot finish its half-load run. Usage: bench/approx-pair.sh [ROUNDS]
cd "$(dirname "$0")/.."

N=${N:-120000}
free() { python3 -c 'import socket;s=socket.socket();s.bind(("",0));print(s.getsockname()[1])'; }
run() { # $1 store args, $2 set
  local log=$(mktemp); node --max-semi-space-size=16 dist/bin.js serve --config bench/rules $1 --port 0 --admin-port 0 > $log 2>&1 &
  local pid=$!; sleep 2.5; local sp=$(grep -o '"port":[0-9]*' $log | head -1 | cut -d: -f2)
  local out=$(timeout 120 node bench/lib/node-load.mjs "{\"port\":$sp,\"connections\":4,\"streams\":16,\"durationS\":1,\"warmupS\":0,\"rps\":0,\"count\":$N,\"domain\":\"bench\",\"set\":\"$2\",\"clients\":10000}")
  kill $pid; wait $pid 2>/dev/null
  echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["rps"]), j["done"], j["errors"])'
}
RP=$(free); redis-server --port $RP --save '' --appendonly no --daemonize yes --pidfile /tmp/approx-pair-redis.pid >/dev/null; sleep 0.5
for round in $(seq 1 "${1:-3}"); do
  m=$(run "" tb2)
  redis-cli -p $RP flushall >/dev/null; redis-cli -p $RP config resetstat >/dev/null
  a=$(run "--redis redis://127.0.0.1:$RP" tb2approx)
  # Script calls: FCALL on Redis 7+ (the function library), EVALSHA/EVAL before it.
  calls=$(redis-cli -p $RP info commandstats | grep -oE 'cmdstat_(fcall|evalsha|eval):calls=[0-9]*' | cut -d= -f2 | python3 -c "import sys; print(sum(int(x) for x in sys.stdin.read().split()))")
  echo "round $round: memory-2tb $m | approx-2tb $a | script calls $calls, per request $(python3 -c "print(round(${calls:-0}/$N,4))")"
done
kill $(cat /tmp/approx-pair-redis.pid)
