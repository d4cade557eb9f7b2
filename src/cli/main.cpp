// Placeholder: the CLI is being written.
int main() { return 1; }
