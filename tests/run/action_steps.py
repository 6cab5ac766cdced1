#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the steps of a composite GitHub Action (action.yml) as one bash
script, as a runner would run them: each step's env and run, with the
expressions the action uses resolved (inputs.*, github.action_path) and
any other expression an error, so that the test notices a step it cannot
stand in for.

    action_steps.py ACTION_YML ACTION_PATH [NAME=VALUE...]  (inputs)
"""
import re
import shlex
import sys

import yaml

EXPR = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def main():
    path, action_path, *given = sys.argv[1:]
    with open(path) as f:
        action = yaml.safe_load(f)
    if action["runs"]["using"] != "composite":
        sys.exit(f"{path}: not a composite action")
    inputs = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    for kv in given:
        k, v = kv.split("=", 1)
        if k not in inputs:
            sys.exit(f"{path} has no input {k}")
        inputs[k] = v

    def resolve(text):
        def one(m):
            e = m.group(1)
            if e == "github.action_path":
                return action_path
            if e.startswith("inputs.") and e[7:] in inputs:
                return inputs[e[7:]]
            sys.exit(f"{path}: expression '{e}' is not one this test knows")
        return EXPR.sub(one, str(text))

    # what the runner does between steps: earlier steps' GITHUB_PATH and
    # GITHUB_ENV lines apply to the later ones
    out = ["set -euo pipefail",
           "runner_env() {",
           "  while read -r d; do PATH=$d:$PATH; done <\"$GITHUB_PATH\"",
           "  while IFS='=' read -r k v; do export \"$k=$v\"; done <\"$GITHUB_ENV\"",
           "}"]
    for step in action["runs"]["steps"]:
        if "uses" in step or "if" in step:
            sys.exit(f"{path}: step '{step.get('name')}' uses or if: not run here")
        if step.get("shell") != "bash":
            sys.exit(f"{path}: step '{step.get('name')}' is not shell: bash")
        out.append(f"echo {shlex.quote('::: ' + step.get('name', 'step'))}")
        env = " ".join(f"{k}={shlex.quote(resolve(v))}"
                       for k, v in (step.get("env") or {}).items())
        body = resolve(step["run"])
        out.append(f"( runner_env; {'export ' + env + ';' if env else ''}\n"
                   f"{body}\n)")
    print("\n".join(out))


main()
