"""The stack's `intelGpuPlugin:` (the device plugin's DaemonSet) and `gpu:` (the route to the iGPU: the device
plugin or Dynamic Resource Allocation, with Intel's resource driver) sections."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, model_validator

from model.config.errors import MISSING, key_rule
from model.config.line_width import fits_export_line
from model.config.values import Dns1123Label, ExportedText, OwnLineImageRef, Sha256Digest, Strict


def _known_plugin_flags(args: list[str]) -> list[str]:
    # Every flag of the pinned gpu_plugin release is allowed or refused, with the upstream reason, in one table
    # (model/plugin_flags.py): -health-management and -xpumd-endpoint need a sidecar or a mount this DaemonSet
    # does not have, -shared-dev-num goes through sharedDevNum and its reason, unknown flags make the plugin exit.
    from model.plugin_flags import check_plugin_args

    problems = check_plugin_args(args)
    if problems:
        raise ValueError("; ".join(problems).removesuffix(".") if len(problems) > 1 else problems[0])
    return args


PluginArg = Annotated[str, StringConstraints(pattern=r"^--?[A-Za-z][-_A-Za-z0-9]*(=[^\s]+)?$"), fits_export_line()]


class IntelGpuPluginConfig(Strict):
    """The Intel GPU device plugin's DaemonSet (components/intel_gpu_plugin.py). No image or digest here: the
    plugin's tag and digest are pinned together in model/images.py, where Renovate bumps both."""

    # How many containers may be allocated one iGPU (the plugin's -shared-dev-num): each node advertises this many
    # gpu.intel.com/i915. Default 1, one container per iGPU: a higher count is a lie the scheduler believes, with
    # no GPU partitioning behind it.
    sharedDevNum: Annotated[int, Field(ge=1, le=64, strict=True)] = 1
    # Why the iGPU is shared: required when sharedDevNum is above 1, and exported as the DaemonSet's
    # gpu-platform.home.arpa/shared-dev-num-reason annotation, so reviewers and the policy pack see it. One line.
    sharedDevNumReason: ExportedText | None = None
    # More flags for the plugin (e.g. -v=4), each checked against the pinned release's flag table
    # (docs/plugin-flags.md): unknown flags are refused (the plugin would exit), -shared-dev-num goes through
    # sharedDevNum, -health-management and -xpumd-endpoint need a sidecar or mount this DaemonSet lacks. Default
    # none: the upstream defaults.
    extraArgs: Annotated[list[PluginArg], AfterValidator(_known_plugin_flags)] = []

    @model_validator(mode="after")
    def _shared_needs_reason(self) -> IntelGpuPluginConfig:
        if self.sharedDevNum > 1 and not (self.sharedDevNumReason or "").strip():
            raise key_rule(("sharedDevNumReason",), MISSING if self.sharedDevNumReason is None
                           else self.sharedDevNumReason,
                           f"sharedDevNum {self.sharedDevNum} lets several pods share one iGPU with no partitioning "
                           "behind it, so the reason is required",
                           "add sharedDevNumReason: <why the iGPU is shared>, or set sharedDevNum: 1")
        return self


# The driver release this project's DRA route is written for (gpu-v0.11.0, 2026-06-10, the one its README marks
# supported, Kubernetes 1.34+); the hint when a stack on the route names no image.
DRA_DRIVER_IMAGE = "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0"


class KustomizationRef(Strict):
    """A Flux Kustomization of the repository, by namespace and name (both required: the export cannot guess
    either)."""

    # Its metadata.namespace, e.g. kube-system (onedr0p/home-ops keeps each app's Kustomization in the app's own
    # namespace), or flux-system where the repository keeps them all there.
    namespace: Dns1123Label
    # Its metadata.name, e.g. intel-gpu-resource-driver.
    name: Dns1123Label


class DraDriverConfig(Strict):
    """Intel's GPU resource driver for Dynamic Resource Allocation (components/intel_gpu_dra.py), used with
    `gpu.route: dra`."""

    # Who installs the driver. export (default): the export writes it (its DaemonSet, the gpu.intel.com DeviceClass,
    # its ValidatingAdmissionPolicy) in a Flux Kustomization of its own, intel-gpu-resource-driver, from image and
    # imageDigest. repository: the repository already installs it (as onedr0p/home-ops does, a HelmRelease of Intel's
    # chart) and the export adopts it: it writes no driver, no DeviceClass and no admission policy, the Kustomizations
    # of the apps that claim a device depend on `kustomization` instead, and its walk of the repository refuses the
    # export if that Kustomization installs no driver. The stages and their evidence are the same either way.
    deliveredBy: Literal["export", "repository"] = "export"
    # With deliveredBy: repository, the repository's Flux Kustomization that installs the driver, e.g.
    # {namespace: kube-system, name: intel-gpu-resource-driver}. Required then, refused otherwise (the export's own
    # driver has its own Kustomization); no default: which one it is, only the repository knows.
    kustomization: KustomizationRef | None = None
    # repository:tag of the driver's kubelet plugin, e.g. the gpu-v0.11.0 release's
    # ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0. Required with route: dra
    # (refused with deliveredBy: repository, whose own release pins the image), with no default, and written with a
    # `# renovate:` marker above it as an app's image is: the tag and the digest below then sit in one file, and
    # Renovate bumps them together.
    image: OwnLineImageRef | None = None
    # The sha256 digest of exactly `image`'s tag, as the registry reports it (`crane digest <image>`). Required with
    # route: dra (refused with deliveredBy: repository, as image is): upstream's own base runs `:latest`, and this
    # project could not read ghcr.io to record one; the export never writes the driver without a digest.
    imageDigest: Sha256Digest | None = None
    # The kernel driver the nodes' iGPU is bound to, as the driver reports it in each device's `driver` attribute:
    # i915 (default, as the device plugin's gpu.intel.com/i915) or xe. The evidence gate requires it on every node.
    kernelDriver: Literal["i915", "xe"] = "i915"
    # Where the move from the device plugin stands (docs/dra.md): each stage is its own export, and the evidence gate
    # allows one only on evidence that the cluster reached the stage before it (model/dra/gate.py).
    # driver-added (step 1, default): the driver beside the plugin, nothing claims a device.
    # apps-on-claims (step 3): every GPU app the export delivers claims the iGPU through a ResourceClaimTemplate,
    #   its gpu.intel.com/i915 request removed in the same export; needs step 2's slice evidence.
    # plugin-removed (step 5): the device plugin is no longer exported; needs step 4's evidence that every claim is
    #   allocated and every app runs.
    stage: Literal["driver-added", "apps-on-claims", "plugin-removed"] = "driver-added"
    # The namespaces where a claim may ask for adminAccess (an app with hardware.draAllocation: admin-access, or a
    # repository's own, e.g. a GPU metrics exporter). Admin access reaches every device of the class, in use or not,
    # so the API server admits it only in a namespace labelled `resource.kubernetes.io/admin-access: "true"`: the
    # export labels the GPU app namespaces it writes, the repository labels any other it names here, and the export's
    # walk of the repository refuses that label, or an adminAccess claim, in a namespace not named here. Empty
    # (default): no admin access anywhere.
    adminAccessNamespaces: list[Dns1123Label] = []

    @property
    def pinned_image(self) -> str:
        return f"{self.image}@{self.imageDigest}"

    @property
    def adopted(self) -> tuple[str, str] | None:
        """(namespace, name) of the repository's Kustomization installing the driver the stack adopts, else None."""
        ref = self.kustomization
        return (ref.namespace, ref.name) if self.deliveredBy == "repository" and ref is not None else None

    @model_validator(mode="after")
    def _who_delivers_the_driver(self) -> DraDriverConfig:
        if self.deliveredBy == "repository" and self.kustomization is None:
            raise key_rule(("kustomization",), MISSING,
                           "deliveredBy: repository adopts the driver a Kustomization of the repository installs, "
                           "and the export must know which one, to make the apps' Kustomizations wait for it",
                           "add kustomization: {namespace: <its namespace>, name: <its name>}, e.g. kube-system and "
                           "intel-gpu-resource-driver, or set deliveredBy: export")
        if self.deliveredBy == "export" and self.kustomization is not None:
            raise key_rule(("kustomization",), self.kustomization.model_dump(mode="json"),
                           "only used with deliveredBy: repository; the export delivers its own driver in its own "
                           "Kustomization intel-gpu-resource-driver",
                           "remove kustomization, or set deliveredBy: repository if the repository installs the driver")
        for key in ("image", "imageDigest"):
            value = getattr(self, key)
            if self.deliveredBy == "repository" and value is not None:
                raise key_rule((key,), value,
                               "not used with deliveredBy: repository: the repository's own release pins the "
                               "driver's image, and the export writes no driver",
                               f"remove {key}{' and imageDigest' if key == 'image' and self.imageDigest else ''}"
                               ", or set deliveredBy: export")
        return self


class GpuConfig(Strict):
    """How GPU apps reach the iGPU, for the whole cluster (docs/dra.md)."""

    # device-plugin (default): the Intel GPU device plugin advertises gpu.intel.com/i915 and apps request it.
    # dra: Dynamic Resource Allocation (resource.k8s.io/v1, GA since Kubernetes 1.34): Intel's GPU resource driver
    # publishes a ResourceSlice per node, and apps claim a device. The move runs in steps, each its own export
    # (dra.stage), each allowed only on evidence of the one before.
    route: Literal["device-plugin", "dra"] = "device-plugin"
    dra: DraDriverConfig = DraDriverConfig()

    @model_validator(mode="after")
    def _dra_needs_its_pinned_image(self) -> GpuConfig:
        if self.route == "dra" and self.dra.deliveredBy == "export" and (self.dra.image is None
                                                                      or self.dra.imageDigest is None):
            problem = ("route: dra needs the driver's image and the sha256 digest of its tag: the export never "
                       "writes it by tag alone")
            if self.dra.image is None:
                raise key_rule(("dra", "image"), MISSING, problem,
                               f"add image: {DRA_DRIVER_IMAGE} (the release this project is written for) and "
                               "imageDigest: <the digest `crane digest <image>` gives>")
            raise key_rule(("dra", "imageDigest"), MISSING, problem,
                           f"add imageDigest: <the digest `crane digest {self.dra.image}` gives>")
        return self
