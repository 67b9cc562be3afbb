# shellcheck shell=bash disable=SC2164,SC2024 # read line by line by say.sh
# The steps of README.md "Quick start" that download (apt, npm), with the host's network.
# The README's one line `sudo make deps deb-install && sudo ocsb-provision ...` is cut
# after `deb-install`: provisioning loads nftables and runs in steps-isolated.sh.
#: # README "Quick start": from a clone of this repository
cd ~/ocsb
sudo make deps deb-install
#: # make is not in a fresh Debian: install it
sudo apt-get update -qq; sudo apt-get install -y -qq make >/dev/null; echo "apt-get: $?"
sudo make deps deb-install 2>&1 | grep -v '^\(cc\|ar\|tools/embed\|dh_\|   \|dpkg-\) ' | tail -n 25
