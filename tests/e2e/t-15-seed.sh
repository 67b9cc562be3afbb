# SPDX-License-Identifier: MIT
# ocsb-provision fills the agent's new clone with the owner's branches, as the owner,
# through the sync key (the same path as `ocsb sync push`).
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

make_project
as_owner git -C "$PROJECT" checkout -q -b dev
as_owner sh -c "cd '$PROJECT' && echo hello > README && git add README && git -c user.name=A -c user.email=a@x commit -qm one && git branch stable"
owner_tip=$(as_owner git -C "$PROJECT" rev-parse HEAD)
# The seeding is the owner's own `ocsb sync push`: ocsb-provision carries no git client.
check_output "positive control: ocsb links libgit2" 'libgit2' ldd "$OCSB_BUILD/ocsb"
check_output "positive control: ldd reads ocsb-provision" 'libc\.so' ldd "$OCSB_BUILD/ocsb-provision"
check_fails "ocsb-provision does not link libgit2" sh -c "ldd '$OCSB_BUILD/ocsb-provision' | grep libgit2"
check_output "provisioning seeds the clone" "fill ~$AGENT/shop with the branches of $PROJECT" provision
check_output "the clone has the owner's commit" "^$owner_tip$" as_user "$AGENT" git -C "/home/$AGENT/shop" rev-parse HEAD
check_output "the clone checks out the owner's branch" '^dev$' as_user "$AGENT" git -C "/home/$AGENT/shop" symbolic-ref --short HEAD
check_output "its working tree is filled" '^hello$' as_user "$AGENT" cat "/home/$AGENT/shop/README"
check_output "every local branch arrived" 'stable' as_user "$AGENT" git -C "/home/$AGENT/shop" branch --list
check_output "the files belong to the agent" "^$AGENT$" stat -c %U "/home/$AGENT/shop/README"
check_fails "the owner's repository got no remote for the agent" as_owner git -C "$PROJECT" config --get "remote.$AGENT.url"
check_output "a second run: 0 changes (never seeded twice)" '^ocsb-provision: 0 changes$' provision
as_user "$AGENT" sh -c "cd /home/$AGENT/shop && echo agent > AGENT && git add AGENT && git -c user.name=B -c user.email=b@x commit -qm two"
check_output "the agent's own work is left alone by later runs" '^ocsb-provision: 0 changes$' provision
check "the agent's commit is still there" as_user "$AGENT" test -f "/home/$AGENT/shop/AGENT"
