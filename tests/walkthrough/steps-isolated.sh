# shellcheck shell=bash disable=SC2164,SC2024 # read line by line by say.sh
# The rest of README.md's quick start and "Without systemd", in a network namespace of its
# own (loopback only): no DNS, no internet, as an offline container would have.
#: # README "Quick start": provisioning (an ssh key first, as the README says)
cd ~/ocsb
[ -f ~/.ssh/id_ed25519.pub ] || ssh-keygen -q -t ed25519 -N "" -f ~/.ssh/id_ed25519
#: # the README's line whole (make deps and deb-install download nothing now: steps-net.sh did)
sudo make deps deb-install >/tmp/make.log 2>&1 && sudo ocsb-provision --owner "$USER" --project ~/code/myproject; echo "exit: $?"; grep '^deps:' /tmp/make.log; tail -n 1 /tmp/make.log
#: # docs/install.md "Without systemd": sudo service ssh start
sudo service ssh start
sudo ocsb-provision --owner "$USER" --project ~/code/myproject 2>&1 | grep -v "^+ "
#: # docs/install.md "Without systemd": sudo ocsb-warden --foreground in a terminal (here: in the background, its log kept)
sudo ocsb-warden --foreground >/tmp/agentd.log 2>&1 &
for i in $(seq 1 300); do [ "$(ocsb status 2>/dev/null | grep -c running)" -ge 2 ] && break; sleep 1; done; echo "waited ${i}s for the proxy and OpenCode"
ocsb status
#: # README: ssh ai-dev@localhost (BatchMode: a host-key question would fail instead of waiting)
ssh -o BatchMode=yes ai-dev@localhost id -un
ssh -o BatchMode=yes ai-dev@localhost 'cd myproject && git switch -c agent-work && echo "written by the agent" >AGENT.md && git add AGENT.md && git commit -qm "agent: add AGENT.md" && git log --oneline -1'
#: # README: ocsb sync pull in the project
cd ~/code/myproject
ocsb sync pull
git log --oneline -1 ai-dev/agent-work
sudo ocsb egress verify 2>&1 | tail -n 5
ocsb doctor 2>&1 | grep -v '^OK'
ocsb mirror status | tail -n 3
#: # README "Quick start" and docs/install.md "Removing"
sudo ocsb-provision --remove --purge 2>&1 | tail -n 5
#: # docs/install.md "Removing", without systemd: stop ocsb-agentd and wait until it has stopped
sudo kill $(pgrep -x ocsb-warden); while pgrep -x ocsb-warden >/dev/null; do sleep 1; done; tail -n 1 /tmp/agentd.log
sudo ocsb-provision --remove --purge 2>&1 | tail -n 8
sudo apt purge -y ocsb 2>&1 | tail -n 3
ls /var/lib/ocsb /etc/ocsb /opt/ocsb 2>&1
echo "--- agentd log (last lines)"; tail -n 15 /tmp/agentd.log
