# The server log database (SCR_LOG_DB_HOST) against a real PostgreSQL:
# a throwaway cluster on 127.0.0.1 with password authentication, started
# here and stopped on exit (scr/tests/log_db_server.rs). ci/setup installs
# PostgreSQL when it is missing. Every wait is bounded.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "logdb-server: PostgreSQL's initdb not found (ci/setup installs it)" >&2
  exit 1
fi
# PostgreSQL refuses to run as root: as root, run it as the postgres user.
as_pg=()
if [ "$(id -u)" = 0 ]; then
  as_pg=(runuser -u postgres --)
fi
dir=$(mktemp -d /tmp/scr-logdb.XXXXXX)
chmod 755 "$dir"
[ "${#as_pg[@]}" = 0 ] || chown postgres "$dir"
stop() {
  "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -t 30 stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT
pass="scr-ci-$RANDOM$RANDOM"
printf '%s\n' "$pass" > "$dir/pw"
chmod 644 "$dir/pw"
"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U scradmin --pwfile="$dir/pw" \
  --auth=scram-sha-256 --no-sync >"$dir/initdb.log" 2>&1 \
  || { cat "$dir/initdb.log" >&2; exit 1; }
# A free port from the kernel.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >/dev/null \
  || { cat "$dir/server.log" >&2; exit 1; }
workspace_bins
export SCR_TEST_PG_HOST="127.0.0.1:$port" SCR_TEST_PG_USER=scradmin SCR_TEST_PG_PASS="$pass"
export SCR_BIN="$PWD/target/debug/scr"
timeout 600 cargo test --workspace --quiet --test log_db_server -- --ignored
echo "logdb-server: ok"
