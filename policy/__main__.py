"""Policy pack for CLI users: `pulumi preview --stack prod --policy-pack policy`.

Each rule of policy/rules.py becomes a mandatory StackValidationPolicy (the app policies need to see Namespaces
and NetworkPolicies together, so they validate the stack, not single resources). The export runs the same rules
offline; this file only adapts them to pulumi-policy.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root: `policy.rules`

# pulumi-policy lives in the pack's own venv (policy/requirements.txt), deliberately not in the product's .venv.
from pulumi_policy import (  # noqa: E402  # pyright: ignore[reportMissingImports]
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyPack,
    StackValidationPolicy,
)

from policy.rules import RULES, Resource, Rule, Settings, evaluate, from_struct  # noqa: E402

CONFIG_SCHEMA = PolicyConfigSchema(properties={
    "egressClassLabel": {"type": "string", "default": Settings.egress_class_label},
    "authModeLabel": {"type": "string", "default": Settings.auth_mode_label},
})


def as_policy(rule: Rule) -> StackValidationPolicy:
    def validate(args, report_violation) -> None:
        config = args.get_config() or {}
        settings = Settings(egress_class_label=config.get("egressClassLabel", Settings.egress_class_label),
                            auth_mode_label=config.get("authModeLabel", Settings.auth_mode_label))
        resources = [Resource(r.resource_type, r.name, r.urn, from_struct(r.props or {})) for r in args.resources]
        for violation in evaluate(resources, settings, [rule]):
            report_violation(f"{violation.resource.ref}: {violation.problem}; hint: {violation.fix}",
                             violation.resource.urn)

    return StackValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY if rule.mandatory else EnforcementLevel.ADVISORY,
        config_schema=CONFIG_SCHEMA,
    )


def build_policies() -> list:
    return [as_policy(rule) for rule in RULES]


if __name__ == "__main__":
    PolicyPack(name="gpu-platform-policies", policies=build_policies(), enforcement_level=EnforcementLevel.MANDATORY)
