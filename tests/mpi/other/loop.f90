! N (first argument) 1-byte MPI_Allreduce calls on MPI_COMM_WORLD from
! Fortran (`use mpi`), for bench/bench_call_instructions.sh: what a traced
! Fortran call costs.
program loop
  use mpi
  implicit none
  integer :: ierr, i, n, x, y
  character(len=32) :: arg
  call get_command_argument(1, arg)
  read (arg, *) n
  call MPI_Init(ierr)
  x = 1
  do i = 1, n
    call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  end do
  call MPI_Finalize(ierr)
end program loop
