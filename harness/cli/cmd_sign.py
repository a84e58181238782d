"""``kvgate sign GATE_DIR --key FILE --signer NAME --role vendor|customer``: write the evidence
manifest of a gate directory and add an Ed25519 signature to it."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from harness.errors import InputError
from harness.exitcodes import ExitCode
from harness.report.sign import ROLES, sign


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "sign",
        help="sign a gate report (Ed25519): each party adds its signature",
        description="Write GATE_DIR/MANIFEST.sha256 (sha256 of every file of the gate, sha256sum "
        "format) and sign it with an Ed25519 key, writing GATE_DIR/signatures/<role>-<signer>.sig.json. "
        "Vendor and customer each sign the same directory; kvgate verify checks both. "
        "Make a key with: ssh-keygen -t ed25519 -f ~/.ssh/kvgate_ed25519 "
        "(OpenSSH and PKCS#8 PEM keys are accepted). The key and passphrase are never printed.",
    )
    p.add_argument("gate_dir", metavar="GATE_DIR", type=Path, help="e.g. reports/<campaign>/G3")
    p.add_argument("--key", required=True, type=Path, metavar="FILE", help="Ed25519 private key file")
    p.add_argument("--signer", required=True, metavar="NAME", help="who signs, e.g. 'Jane Doe, ACME'")
    p.add_argument("--role", required=True, choices=ROLES, help="the party the signer acts for")
    p.add_argument("--passphrase-env", metavar="VAR",
                   help="name of an environment variable holding the key's passphrase")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    passphrase = None
    if args.passphrase_env:
        value = os.environ.get(args.passphrase_env)
        if value is None:
            raise InputError(f"--passphrase-env: environment variable {args.passphrase_env} is not set")
        passphrase = value.encode("utf-8")
    path = sign(args.gate_dir, args.key, args.signer, args.role, passphrase=passphrase, progress=True)
    doc = json.loads(path.read_text(encoding="utf-8"))
    print(f"signed   {args.gate_dir} as {args.role} {args.signer} with key {doc['fingerprint']}")
    print(f"manifest {args.gate_dir / 'MANIFEST.sha256'}")
    print(f"signature {path}")
    return int(ExitCode.OK)
