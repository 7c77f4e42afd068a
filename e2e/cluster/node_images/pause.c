/* The node tier's sandbox ("pause") container: holds a pod's namespaces open until it is told to
 * stop, and reaps the orphans that land on it as a pod's PID 1. Built with gcc -static, so the
 * image is this one file. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
    (void)sig;
    _exit(0);
}

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction quit = {.sa_handler = stop};
    struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    sigaction(SIGINT, &quit, NULL);
    sigaction(SIGTERM, &quit, NULL);
    sigaction(SIGCHLD, &child, NULL);
    for (;;) {
        pause();
    }
    return EXIT_FAILURE;
}
