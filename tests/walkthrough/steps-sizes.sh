# shellcheck shell=bash disable=SC2164,SC2024 # read line by line by say.sh
# What `make deps` and `make test-deps` add to the walk-through's fresh root, measured on
# disk (du -sx of / in the walk-through's namespace: the root's own filesystem, not /proc,
# /run or /tmp), with the host's network:
#   sudo WALK_STEPS_NET=tests/walkthrough/steps-sizes.sh \
#     WALK_STEPS_ISOLATED=tests/walkthrough/steps-none.sh [WALK_RELEASE=trixie] tests/walkthrough/run.sh
# "with .debs": as apt leaves it (its downloaded packages in /var/cache/apt/archives);
# "clean": after `apt-get clean`, as a container image's apt configuration keeps it.
#: # the fresh root, then README "Quick start" step 1 (git and make)
echo "fresh root: $(sudo du -sxm / | cut -f1) MB"
sudo apt-get update -qq && sudo apt-get install -y -qq git make >/dev/null; sudo apt-get clean; echo "after step 1 (git, make), clean: $(sudo du -sxm / | cut -f1) MB"
cd ~/ocsb
sudo make deps >/tmp/deps.log 2>&1; echo "make deps: exit $?; $(tail -n 1 /tmp/deps.log)"
echo "after make deps, with .debs: $(sudo du -sxm / | cut -f1) MB"
sudo apt-get clean; echo "after make deps, clean: $(sudo du -sxm / | cut -f1) MB; of it /opt/ocsb: $(sudo du -sxm /opt/ocsb | cut -f1) MB; packages: $(dpkg-query -W | wc -l)"
sudo make test-deps >/tmp/test-deps.log 2>&1; echo "make test-deps: exit $?; $(tail -n 1 /tmp/test-deps.log)"
echo "after make test-deps, with .debs: $(sudo du -sxm / | cut -f1) MB"
sudo apt-get clean; echo "after make test-deps, clean: $(sudo du -sxm / | cut -f1) MB; packages: $(dpkg-query -W | wc -l)"
