#!/usr/bin/env bash
# Run the reference Kinetic simulator (com.seagate.kinetic:kinetic-simulator:0.8.0.4) safely:
# bound to 127.0.0.1 only (plain and TLS port) and with the multicast heartbeat off.
#
#   scripts/java-simulator.sh PORT TLS_PORT HOME_DIR [--verbose]
#
# PORT / TLS_PORT may be 0 (pick a free port). When the simulator is ready it prints one line
#   kinetic simulator listening on 127.0.0.1:PORT tls 127.0.0.1:TLSPORT home DIR
# to stdout. The script execs java, so killing the script's PID kills the simulator.
#
# The launcher (interop/simulator) is built with Maven on first use (mvn downloads the
# simulator and its dependencies from Maven Central) and rebuilt when its sources change.
# Never run the stock SimulatorRunner main class: it binds every address and multicasts.
set -euo pipefail

if [[ $# -lt 3 ]]; then
    echo "usage: $0 PORT TLS_PORT HOME_DIR [--verbose]" >&2
    exit 2
fi
port=$1 tls_port=$2 home=$3
shift 3

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
proj=$root/interop/simulator
cp_file=$proj/target/classpath.txt
main_class=$proj/target/classes/spindle/interop/simulator/LoopbackSimulator.class

if [[ ! -f $cp_file || ! -f $main_class ]] \
    || [[ -n $(find "$proj/pom.xml" "$proj/src" -newer "$cp_file" -print -quit) ]]; then
    echo "java-simulator: building launcher (interop/simulator)" >&2
    mvn -B -q -f "$proj/pom.xml" compile >&2
fi

mkdir -p "$home"

# Netty 4.0.17 needs these on Java 17 (see shared kinetic-notes).
exec java \
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED \
    --add-opens java.base/java.nio=ALL-UNNAMED \
    -Djava.net.preferIPv4Stack=true \
    -cp "$proj/target/classes:$(cat "$cp_file")" \
    spindle.interop.simulator.LoopbackSimulator \
    --port "$port" --tls-port "$tls_port" --home "$home" "$@"
