# The node's agent, its container's first process: it runs the server
# ($SERVER) and does what the harness asks, one command a line on stdin,
# one reply a line on stdout ("ok [output]" or "fail [output]"). A round
# trip over the attached stream takes about a millisecond where docker exec
# takes near a hundred, and a kill and restart must fit inside a lease.
pid=
# Partitions go in a chain of their own on the way in, made now so that a
# cut later is one quick rule (the first iptables call in a namespace is
# the slow one).
iptables -w -N locktorture 2>/dev/null && iptables -w -I INPUT -j locktorture
while read -r cmd arg; do
  case "$cmd" in
    start) sh -c "$SERVER" </dev/null >/dev/null 2>&1 & pid=$!; echo ok ;;
    # wait reaps the server: when the reply comes it is gone. One that
    # outlives a SIGTERM by 5 s is killed.
    kill) kill -"$arg" "$pid" 2>/dev/null
          (sleep 5; kill -9 "$pid" 2>/dev/null) & w=$!
          wait "$pid" 2>/dev/null; kill "$w" 2>/dev/null; echo ok ;;
    signal) if kill -"$arg" "$pid" 2>/dev/null; then echo ok; else echo fail no server; fi ;;
    alive) if kill -0 "$pid" 2>/dev/null; then echo ok; else echo fail; fi ;;
    sh) if out=$(eval "$arg" 2>&1); then echo "ok" $out; else echo "fail" $out; fi ;;
    *) echo "fail unknown command $cmd" ;;
  esac
done
