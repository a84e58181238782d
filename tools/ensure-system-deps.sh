#!/usr/bin/env bash
# Installs the system tools the tests and the demo run for real: fio and OpenSSH (sshd on
# loopback). Quiet and quick when they are already there.
set -euo pipefail
need=()
command -v fio >/dev/null 2>&1 || need+=(fio)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v chromium >/dev/null 2>&1 || need+=(chromium)  # report pages checked in a real browser
command -v pdfsig >/dev/null 2>&1 || need+=(poppler-utils)  # pdftotext / pdfsig check the sign-off PDF
[ -f /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || need+=(fonts-noto-cjk)  # zh reports
# PostgreSQL server binaries for the history tests (Debian keeps them off PATH, in /usr/lib/postgresql/*/bin)
command -v initdb >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
ldconfig -p 2>/dev/null | grep -q 'libpangoft2-1.0.so.0' || need+=(libpangoft2-1.0-0)  # WeasyPrint (PDF)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "kvgate: missing system packages: ${need[*]}; install them (as root: apt-get install ${need[*]})" >&2
  exit 1
fi
echo "kvgate: installing ${need[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
