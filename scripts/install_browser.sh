#!/usr/bin/env bash
# Install Debian's Chromium for the review-instrument browser test, only if it is missing.
# Idempotent: a machine that already has /usr/bin/chromium is left untouched. Playwright is
# driven against this binary; it never downloads a browser of its own.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    echo "chromium already installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: $CHROMIUM is missing and apt-get is not available; install Chromium so that" \
         "$CHROMIUM exists (the browser test uses that path)" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "error: installing chromium needs root (or sudo)" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium

if [ ! -x "$CHROMIUM" ]; then
    echo "error: apt installed chromium but $CHROMIUM is still missing" >&2
    exit 1
fi
echo "installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
