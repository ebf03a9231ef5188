"""The names of the labels and annotations the program writes and the policy rules read, in one place.

components/ writes them, policy/ and the export's checks read them, and the stack config measures its longest
value line against SHARED_DEV_NUM_REASON_ANNOTATION (model/config/line_width.py): none of them defines its own.
"""

from __future__ import annotations

# Why the GPU plugin's iGPU is shared (sharedDevNumReason), on the plugin's DaemonSet; required above one share.
SHARED_DEV_NUM_REASON_ANNOTATION = "gpu-platform.home.arpa/shared-dev-num-reason"
# On a Namespace: the app policies (Kyverno's and policy/rules.py's) judge the apps in it.
APP_NAMESPACE_LABEL = "app-namespace"
# The API server admits adminAccess claims only in a namespace labelled so ("true").
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
# gpu.route: dra, step 5: on the DRA driver's namespace; from then on no Intel GPU device plugin may run beside it.
PLUGIN_REMOVED_LABEL = "gpu-platform.home.arpa/device-plugin-removed"
