#!/usr/bin/env bash
# scripts/install-deps on a machine that has every dependency must not touch apt-get or
# sudo (it did: one `ls` of two library paths failed whenever either was missing, so a
# non-root user, or anyone while apt held its lock, could not run scripts/test).
set -uo pipefail
root=$1
fail() { echo "FAIL: $*"; exit 1; }
"$root/scripts/install-deps" --check >/dev/null || { echo "a dependency is missing: skipped"; exit 77; }
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
for tool in apt-get sudo; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/called"\nexit 1\n' "$tool" "$fake" >"$fake/$tool"
  chmod +x "$fake/$tool"
done
PATH="$fake:$PATH" "$root/scripts/install-deps" || fail "install-deps exited $? with everything present"
[ ! -e "$fake/called" ] || fail "install-deps ran: $(cat "$fake/called")"
"$root/scripts/install-deps" --bogus 2>/dev/null; [ $? -eq 2 ] || fail "--bogus is not a usage error"
echo "install-deps: nothing to install, apt-get and sudo untouched"
