# shellcheck shell=bash disable=SC2164,SC2024 # read line by line by say.sh
# The steps of README.md "Quick start" that download (apt, npm), with the host's network.
# The README's one line `sudo make deps deb-install && sudo ocsb-provision ...` is cut
# after `deb-install`: provisioning loads nftables and runs in steps-isolated.sh.
#: # README "Quick start", step 1: a fresh Debian has neither git nor make
sudo apt-get update -qq && sudo apt-get install -y -qq git make >/dev/null; echo "apt-get: $?"
#: # step 2: the clone of this repository (run.sh made ~/ocsb from HEAD)
cd ~/ocsb
sudo make deps deb-install 2>&1 | grep -v '^\(cc\|ar\|tools/embed\|dh_\|   \|dpkg-\) ' | tail -n 25
