! A Fortran MPI program (`use mpi`) that hangs as tests/mpi/mpi_prog.c's
! "stuck" mode does: five steps of an MPI_Allreduce on MPI_COMM_WORLD and a
! message from rank 0 to rank 1 (tag 7); in the sixth, rank 1 skips the
! MPI_Allreduce, which the others wait in, and waits in MPI_Recv for the
! message. Rank 0 prints "stuck" once it is in place. Nothing here knows
! hangtrace.
program stuck
  use mpi
  implicit none
  integer :: rank, ierr, i, x, y
  integer :: status(MPI_STATUS_SIZE)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  x = 1
  do i = 1, 6
    if (i == 6 .and. rank == 0) then
      print '(a)', 'stuck'
      flush(6)
    end if
    if (i < 6 .or. rank /= 1) call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (rank == 0 .and. i < 6) call MPI_Send(x, 1, MPI_INTEGER, 1, 7, MPI_COMM_WORLD, ierr)
    if (rank == 1) call MPI_Recv(y, 1, MPI_INTEGER, 0, 7, MPI_COMM_WORLD, status, ierr)
  end do
  call MPI_Finalize(ierr)
end program stuck
