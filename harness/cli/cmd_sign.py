"""``kvgate sign GATE_DIR --key FILE --signer NAME --role vendor|customer``: write the statement
and evidence manifest of a gate directory and add an OpenSSH (SSHSIG) signature to it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.errors import InputError
from harness.exitcodes import ExitCode
from harness.report.sign import ROLES, sign


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "sign",
        help="sign a gate report (ssh-keygen -Y sign): each party adds its signature",
        description="Write GATE_DIR/SIGNOFF.json (campaign, gate) and GATE_DIR/MANIFEST.sha256 "
        "(sha256 of every file, sha256sum format) and sign the manifest with ssh-keygen -Y sign in "
        "namespace kvgate-report@v1, writing GATE_DIR/signatures/<role>-<signer-id>.sig. "
        "Any key OpenSSH signs with works: a private key file (make one with ssh-keygen -t ed25519 "
        "-f FILE), a public key file whose private key is in ssh-agent, or a hardware key "
        "(sk-ssh-ed25519). The signer id (printed) is the principal '<signer-id>@<role>' the "
        "other party puts in its allowed_signers file. The passphrase is never printed.",
    )
    p.add_argument("gate_dir", metavar="GATE_DIR", type=Path, help="e.g. reports/<campaign>/G3")
    p.add_argument("--key", required=True, type=Path, metavar="FILE",
                   help="private key file, or public key file of a key held by ssh-agent")
    p.add_argument("--signer", required=True, metavar="NAME", help="who signs, any script, e.g. 'Jörg Müller'")
    p.add_argument("--signer-id", metavar="ID",
                   help="ASCII id for file names and principals (default: derived from --signer)")
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
    path = sign(args.gate_dir, args.key, args.signer, args.role, signer_id_=args.signer_id,
                passphrase=passphrase, progress=True)
    sid = path.name[len(args.role) + 1:-len(".sig")]
    print(f"signed    {args.gate_dir} as {args.role} {args.signer} (principal {sid}@{args.role})")
    print(f"manifest  {args.gate_dir / 'MANIFEST.sha256'}")
    print(f"signature {path}")
    print(f"check     ssh-keygen -Y verify -f allowed_signers -I {sid}@{args.role} -n kvgate-report@v1 "
          f"-s {path} < {args.gate_dir / 'MANIFEST.sha256'}")
    return int(ExitCode.OK)
