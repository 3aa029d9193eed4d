// pvcnoded: the PVC node daemon.
int main() { return 0; }
