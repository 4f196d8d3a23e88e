"""`cepkit config show|keys`: the resolved configuration, or every valid key."""

from __future__ import annotations

from cepkit_app.cli import add_config_options, command_config


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    show = actions.add_parser("show", help="print the resolved config as TOML (defaults + file + --set)")
    add_config_options(show)
    show.set_defaults(handler=_show)
    keys = actions.add_parser("keys", help="list every valid config key, its type and range")
    keys.set_defaults(handler=_keys)


def _show(args) -> int:
    print(command_config(args).to_toml(), end="")
    return 0


def _keys(args) -> int:
    from kit.config import describe_keys
    rows = describe_keys()
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{width}}  {d}" for k, d in rows))
    return 0
