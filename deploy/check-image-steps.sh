#!/usr/bin/env bash
# Repeats the build steps of deploy/Dockerfile in a temporary directory, without Docker, and
# checks what the image would hold and run. It reads the Dockerfile itself (COPY, RUN, ENV,
# WORKDIR, HEALTHCHECK, CMD), so an edit there is checked here too:
#
#   deploy/check-image-steps.sh            # from the project root; leaves nothing behind
#   KEEP=1 deploy/check-image-steps.sh     # keep the temporary directory to look inside
#
# What differs from a real `docker build`: the base image is this machine (its node, npm and
# compiler), `apt-get` steps are replaced by checking that their tools exist, `chown` to the
# image's user is skipped (we are not root), and /app and /data are directories under the
# temporary one. Needs the npm registry (npm ci) and a C/C++ toolchain, as the image does.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dockerfile="$root/deploy/Dockerfile"
work="$(mktemp -d "${TMPDIR:-/tmp}/magpie-image-XXXXXX")"
cleanup() {
  if [[ -n "${chat_pid:-}" ]]; then kill "$chat_pid" 2>/dev/null || true; fi
  if [[ "${KEEP:-}" == "1" ]]; then echo "kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }
fail() { printf '\nFAILED: %s\n' "$*" >&2; exit 1; }

mkdir -p "$work/data"
stage=""
stage_dir=""
healthcheck=""
cmd=""

# Image paths → directories here.
map_paths() {
  local text="$1"
  text="${text//\/app/$stage_dir}"
  text="${text//\/data/$work/data}"
  printf '%s' "$text"
}

# Joins continuation lines, drops comments and blank lines.
instructions() {
  sed -e 's/[[:space:]]*$//' "$dockerfile" | awk '
    /^[[:space:]]*#/ { next }
    /^[[:space:]]*$/ { next }
    { if (sub(/\\$/, "")) { buffer = buffer $0 " "; next } print buffer $0; buffer = "" }
  '
}

while IFS= read -r line; do
  keyword="${line%% *}"
  rest="${line#* }"
  case "$keyword" in
    FROM)
      if [[ "$rest" == *" AS "* ]]; then stage="${rest##* AS }"; else stage="runtime"; fi
      stage_dir="$work/$stage"
      mkdir -p "$stage_dir"
      step "stage $stage ($rest) in $stage_dir"
      ;;
    WORKDIR)
      mkdir -p "$(map_paths "$rest")"
      ;;
    ENV)
      # KEY=value pairs; paths inside the image are mapped.
      for pair in $rest; do
        export "$(map_paths "$pair")"
      done
      ;;
    COPY)
      from="$root"
      if [[ "$rest" == --from=* ]]; then
        source_stage="${rest%% *}"
        source_stage="${source_stage#--from=}"
        from="$work/$source_stage"
        rest="${rest#* }"
      fi
      read -r -a parts <<< "$rest"
      destination="${parts[${#parts[@]}-1]}"
      unset 'parts[${#parts[@]}-1]'
      if [[ "$destination" == /* ]]; then destination="$(map_paths "$destination")"; else destination="$stage_dir/$destination"; fi
      for source in "${parts[@]}"; do
        # In another stage, /app is that stage's working directory.
        [[ "$from" == "$root" ]] || source="${source#/app/}"
        echo "COPY $source -> ${destination#"$work"/}"
        [[ -e "$from/$source" ]] || fail "COPY source missing: $from/$source"
        if [[ "$destination" == */ ]]; then
          mkdir -p "$destination"
          cp -a "$from/$source" "$destination"
        else
          mkdir -p "$(dirname "$destination")"
          rm -rf "$destination"
          cp -a "$from/$source" "$destination"
        fi
      done
      ;;
    RUN)
      if [[ "$rest" == *apt-get* ]]; then
        echo "RUN (apt-get) -> checking its tools instead: python3 make g++"
        for tool in python3 make g++; do command -v "$tool" >/dev/null || fail "$tool is not installed (the image installs it)"; done
        continue
      fi
      command_text="$(map_paths "$rest")"
      command_text="${command_text//chown node:node/true}"
      echo "RUN $command_text"
      (cd "$stage_dir" && bash -euo pipefail -c "$command_text") || fail "RUN step failed: $rest"
      ;;
    HEALTHCHECK)
      healthcheck="${rest#*CMD }"
      ;;
    CMD)
      cmd="$rest"
      ;;
    USER)
      [[ "$rest" != "root" && "$rest" != "0" ]] || fail "the image runs as root"
      ;;
    VOLUME | EXPOSE) ;;
    *) fail "unknown Dockerfile instruction: $keyword" ;;
  esac
done < <(instructions)

app="$work/runtime"
step "what the runtime image holds"
for needed in node_modules dist/src/cli/main.js package.json config.toml; do
  [[ -e "$app/$needed" ]] || fail "missing in the image: $needed"
done
# Production dependencies only: no devDependency of package.json may be in the image, unless a
# production dependency needs it too (discord.js brings @types/node through @types/ws).
production_tree="$(cd "$app" && npm ls --omit=dev --all --parseable 2>/dev/null || true)"
for dev in $(node -e 'console.log(Object.keys(require(process.argv[1]).devDependencies ?? {}).join(" "))' "$root/package.json"); do
  [[ -e "$app/node_modules/$dev" ]] || continue
  grep -q "/node_modules/$dev\$" <<<"$production_tree" || fail "dev dependency $dev is in the image (npm prune --omit=dev)"
done
[[ ! -e "$app/src" && ! -e "$app/test" && ! -e "$app/bench" ]] || fail "sources, tests or benchmarks were copied into the runtime image"
[[ ! -e "$app/dist/test" && ! -e "$app/dist/bench" ]] || fail "compiled tests or benchmarks are in the image (dist/test, dist/bench)"
[[ -z "$(find "$app/dist" -name '*.test.js' -print -quit)" ]] || fail "a compiled test file is in the image"
grep -q '^listen = "0.0.0.0:9464"$' "$app/config.toml" || fail "the image's config does not listen on 0.0.0.0:9464"
echo "ok: node_modules (production dependencies only), dist/src (no tests, no benchmarks), package.json, config.toml (metrics on 0.0.0.0:9464)"

cd "$app"
step "the entry point runs"
node dist/src/cli/main.js --version
node dist/src/cli/main.js config check config.toml

step "CMD without a token says what to set (exit 3)"
read -r -a cmd_words <<< "$(node -e 'console.log(JSON.parse(process.argv[1]).join(" "))' "$cmd")"
set +e
start_output="$(env -u DISCORD_TOKEN "${cmd_words[@]//\/app/$app}" 2>&1)"
start_code=$?
set -e
[[ $start_code -eq 3 ]] || fail "CMD exited $start_code, expected 3: $start_output"
grep -q 'DISCORD_TOKEN is not set' <<< "$start_output" || fail "CMD did not explain the missing token: $start_output"
echo "ok: exit 3, names DISCORD_TOKEN"

step "HEALTHCHECK against the running app (magpie chat, same runtime and listener)"
port="$(node -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')"
sed "s/^listen = .*/listen = \"127.0.0.1:$port\"/" config.toml > "$work/check.toml"
mkfifo "$work/chat-input"
node dist/src/cli/main.js chat --config "$work/check.toml" < "$work/chat-input" > "$work/chat.log" 2>&1 &
chat_pid=$!
exec 3> "$work/chat-input"
# The exact HEALTHCHECK command, with the test port in place of 9464.
run_healthcheck() {
  node -e '
    const { spawnSync } = require("node:child_process");
    const words = JSON.parse(process.argv[1]).map((word) => word.replaceAll("9464", process.argv[2]));
    process.exit(spawnSync(words[0], words.slice(1), { stdio: "ignore" }).status ?? 1);
  ' "$healthcheck" "$port"
}
healthy=""
for _ in $(seq 1 60); do
  if run_healthcheck; then healthy=1; break; fi
  sleep 0.5
done
[[ -n "$healthy" ]] || fail "the HEALTHCHECK command never succeeded; chat log: $(cat "$work/chat.log")"
echo "ok: HEALTHCHECK passes against /healthz"
curl_ready="$(node -e "fetch('http://127.0.0.1:$port/readyz').then(async (r) => console.log(r.status, (await r.text()).trim()))")"
echo "readyz: $curl_ready"
echo "/quit" >&3
exec 3>&-
wait "$chat_pid" || fail "magpie chat did not exit cleanly: $(cat "$work/chat.log")"
chat_pid=""

step "all image steps passed"
