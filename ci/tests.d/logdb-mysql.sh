# The MySQL/MariaDB log database (SCR_LOG_DB_HOST=mysql://...) against a
# real MariaDB: a throwaway server on 127.0.0.1 with password
# authentication, started here and stopped on exit
# (scr/tests/log_db_mysql.rs), then a C application logging there, into
# this library's tables and into SCR 3.1's. ci/setup installs MariaDB's server and client
# cores when they are missing. Every wait is bounded.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/env.sh
for tool in mariadb-install-db mariadb; do
  command -v "$tool" >/dev/null 2>&1 || { echo "logdb-mysql: $tool not found (ci/setup installs it)" >&2; exit 1; }
done
mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)
[ -x "$mariadbd" ] || { echo "logdb-mysql: mariadbd not found (ci/setup installs it)" >&2; exit 1; }
# The server runs as the mysql user where the system has one, else as
# whoever runs this (as root, only when told so: --user=root).
user=$(id -un)
if [ "$(id -u)" = 0 ] && id mysql >/dev/null 2>&1; then user=mysql; fi
dir=$(mktemp -d /tmp/scr-mysql.XXXXXX)
chmod 755 "$dir"
chown "$user" "$dir"
stop() {
  local pid
  pid=$(cat "$dir/pid" 2>/dev/null || true)
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap stop EXIT
timeout 120 mariadb-install-db --no-defaults --datadir="$dir/data" --user="$user" \
  --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1 \
  || { cat "$dir/install.log" >&2; exit 1; }
# A free port from the kernel.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$mariadbd" --no-defaults --datadir="$dir/data" --user="$user" --socket="$dir/sock" \
  --port="$port" --bind-address=127.0.0.1 --pid-file="$dir/pid" --log-error="$dir/server.log" \
  --skip-log-bin --innodb-flush-log-at-trx-commit=0 --innodb-buffer-pool-size=64M \
  >/dev/null 2>&1 &
client=(mariadb --no-defaults --socket="$dir/sock" -uroot)
up=0
for _ in $(seq 1 120); do
  if "${client[@]}" -e "SELECT 1" >/dev/null 2>&1; then up=1; break; fi
  sleep 0.5
done
[ "$up" = 1 ] || { echo "logdb-mysql: the server did not start in 60 s" >&2; cat "$dir/server.log" >&2; exit 1; }
pass="scr-ci-$RANDOM$RANDOM"
"${client[@]}" -e "CREATE USER 'scradmin'@'127.0.0.1' IDENTIFIED BY '$pass'; \
  GRANT ALL ON *.* TO 'scradmin'@'127.0.0.1';"
workspace_bins
export SCR_TEST_MYSQL_HOST="127.0.0.1:$port" SCR_TEST_MYSQL_USER=scradmin SCR_TEST_MYSQL_PASS="$pass"
export SCR_BIN="$PWD/target/debug/scr"
timeout 600 cargo test --workspace --quiet --test log_db_mysql -- --ignored

# A C application relinked against libscr (ci/install: the build capi.sh
# made) logs to the same server as an SCR 3.1 job would: 4 ranks on four
# simulated nodes, the site's settings in its system file.
install="$dir/install"
ci/install "$install" >/dev/null
# shellcheck disable=SC2046
mpicc -std=c99 -O1 -o "$dir/ckpt_restart" testing/c/ckpt_restart.c -Itesting/c \
  $(PKG_CONFIG_PATH="$install/lib/pkgconfig" pkg-config --cflags --libs scr)
"${client[@]}" -e "CREATE DATABASE scr_capi"
cat >"$dir/scr.conf" <<CONF
SCR_LOG_ENABLE=1
SCR_LOG_DB_ENABLE=1
SCR_LOG_DB_HOST=mysql://127.0.0.1:$port
SCR_LOG_DB_NAME=scr_capi
SCR_LOG_DB_USER=scradmin
SCR_LOG_DB_PASS=$pass
CONF
mkdir -p "$dir/app/prefix" "$dir/app/nodes"
node_contexts "$dir/app/nodes" "$dir/ckpt_restart" write
(cd "$dir/app/prefix" && SCR_CONFIG_FILE="$dir/scr.conf" SCR_PREFIX="$dir/app/prefix" \
  SCR_JOB_ID=capi-mysql SCR_COPY_TYPE=XOR timeout 120 mpirun --oversubscribe \
  -x SCR_CONFIG_FILE -x SCR_PREFIX -x SCR_JOB_ID -x SCR_COPY_TYPE "${CONTEXTS[@]}")
ends=$("${client[@]}" -N -B -e "SELECT COUNT(*) FROM scr_capi.events e \
  JOIN scr_capi.jobs j ON j.id = e.job_id \
  WHERE j.jobid = 'capi-mysql' AND e.type = 'CHECKPOINT_END'")
[ "$ends" = 3 ] || { echo "logdb-mysql: the C application logged $ends CHECKPOINT_END rows, not 3" >&2; exit 1; }
echo "logdb-mysql: ok (and a C application's 3 checkpoints logged)"

# The same application at a site whose database was made from SCR 3.1's
# scr.mysql (scr/src/log/scr31.sql holds its tables): its entries go into
# SCR 3.1's tables under its user and SCR_JOB_NAME, none of ours are made.
"${client[@]}" -e "CREATE DATABASE scr_capi31"
"${client[@]}" scr_capi31 <scr/src/log/scr31.sql
sed -i 's/^SCR_LOG_DB_NAME=.*/SCR_LOG_DB_NAME=scr_capi31/' "$dir/scr.conf"
rm -rf "$dir/app"
mkdir -p "$dir/app/prefix" "$dir/app/nodes"
node_contexts "$dir/app/nodes" "$dir/ckpt_restart" write
(cd "$dir/app/prefix" && SCR_CONFIG_FILE="$dir/scr.conf" SCR_PREFIX="$dir/app/prefix" \
  SCR_JOB_ID=capi-mysql31 SCR_JOB_NAME=capi-heat SCR_USER_NAME=capi-user SCR_COPY_TYPE=XOR \
  timeout 120 mpirun --oversubscribe -x SCR_CONFIG_FILE -x SCR_PREFIX -x SCR_JOB_ID \
  -x SCR_JOB_NAME -x SCR_USER_NAME -x SCR_COPY_TYPE "${CONTEXTS[@]}")
ends=$("${client[@]}" -N -B -e "SELECT COUNT(*) FROM scr_capi31.events e \
  JOIN scr_capi31.types t ON t.id = e.type_id JOIN scr_capi31.jobs j ON j.id = e.job_id \
  JOIN scr_capi31.usernames u ON u.id = j.username_id \
  JOIN scr_capi31.jobnames n ON n.id = j.jobname_id \
  WHERE u.name = 'capi-user' AND n.name = 'capi-heat' AND t.name = 'CHECKPOINT_END'")
[ "$ends" = 3 ] || { echo "logdb-mysql: the C application logged $ends CHECKPOINT_END rows in SCR 3.1's tables, not 3" >&2; exit 1; }
ours=$("${client[@]}" -N -B -e "SELECT COUNT(*) FROM information_schema.tables \
  WHERE table_schema = 'scr_capi31' AND table_name IN ('schema_version', 'runs')")
[ "$ours" = 0 ] || { echo "logdb-mysql: the library made its own tables in SCR 3.1's database" >&2; exit 1; }
echo "logdb-mysql: ok (and the same application's 3 checkpoints in SCR 3.1's tables)"
